/**
 * The `full` size's sources: Blender's open films, each with its licence record. Licences and
 * credits as the films' own release pages give them (Big Buck Bunny's credit line is "(c)
 * copyright Blender Foundation | www.bigbuckbunny.org"). The download URLs are the Blender
 * Foundation's own mirrors; a film whose URL stops answering is recorded as failed with the
 * reason and the others proceed.
 */
export const BLENDER_FILMS = [
  {
    id: 'elephants-dream',
    uri: 'https://download.blender.org/ED/ED_1024.avi',
    title: 'Elephants Dream',
    author: 'Orange Open Movie Project (Blender Foundation)',
    licence: 'CC-BY-2.5',
    deedUrl: 'https://creativecommons.org/licenses/by/2.5/',
    sourceUrl: 'https://orange.blender.org/',
  },
  {
    id: 'big-buck-bunny',
    uri: 'https://download.blender.org/peach/bigbuckbunny_movies/big_buck_bunny_720p_h264.mov',
    title: 'Big Buck Bunny',
    author: 'Blender Foundation | www.bigbuckbunny.org',
    licence: 'CC-BY-3.0',
    deedUrl: 'https://creativecommons.org/licenses/by/3.0/',
    sourceUrl: 'https://peach.blender.org/',
  },
  {
    id: 'sintel',
    uri: 'https://download.blender.org/durian/movies/Sintel.2010.720p.mkv',
    title: 'Sintel',
    author: 'Blender Foundation | durian.blender.org',
    licence: 'CC-BY-3.0',
    deedUrl: 'https://creativecommons.org/licenses/by/3.0/',
    sourceUrl: 'https://durian.blender.org/',
  },
  {
    id: 'tears-of-steel',
    uri: 'https://download.blender.org/demo/movies/ToS/tears_of_steel_720p.mov',
    title: 'Tears of Steel',
    author: 'Blender Foundation | mango.blender.org',
    licence: 'CC-BY-3.0',
    deedUrl: 'https://creativecommons.org/licenses/by/3.0/',
    sourceUrl: 'https://mango.blender.org/',
  },
  {
    id: 'spring',
    uri: 'https://upload.wikimedia.org/wikipedia/commons/a/a5/Spring_-_Blender_Open_Movie.webm',
    title: 'Spring',
    author: 'Blender Animation Studio',
    licence: 'CC-BY-4.0',
    deedUrl: 'https://creativecommons.org/licenses/by/4.0/',
    sourceUrl: 'https://studio.blender.org/films/spring/',
  },
] as const;
