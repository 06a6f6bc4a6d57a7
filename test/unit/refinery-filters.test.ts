/**
 * The refinery's document filters: each threshold with a document just inside and one just
 * outside it, real-looking clean and spam pages, C4's line removal, language ID, bad input, and
 * the speed of the n-gram rules on a 100,000-word document (printed, not asserted).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError } from '#shared/errors.ts';
import {
  applyFilters,
  c4QualityFilter,
  FILTER_ORDER,
  FilterConfig,
  type FilterConfigInput,
  finewebQualityFilter,
  type GopherRepetitionParams,
  gopherQualityFilter,
  gopherRepetitionFilter,
  languageFilter,
  type Removed,
} from '#shared/refinery/filters.ts';
import { duplicateNgramCharFraction, firstOccurrences, topNgramCharFraction, toWordSequence } from '#shared/refinery/ngrams.ts';
import { charLength, countedWords, countSentences, isCountedWord, splitParagraphs, splitWords, stripPunctuation } from '#shared/refinery/text.ts';
import { randomInt, seededRandom } from '#shared/random.ts';

// ---------------------------------------------------------------------------------------------
// Fixtures.

/** Five paragraphs of ordinary English prose, 503 words. */
const CLEAN_ENGLISH = `The river that runs through the old market town has shaped the lives of the people who live along its banks for more than a thousand years. Farmers once depended on its spring floods to water their fields, and merchants used its slow brown current to carry grain, wool and timber down to the coast. Today the barges are gone, but the river still decides where the roads bend and where the houses stand.

In the early morning, when the mist lies low over the water, the town is quiet. A few fishermen sit on the stone steps below the bridge, and the baker on the corner opens his shutters to let out the smell of fresh bread. By eight o'clock the streets fill with children walking to school, and the sound of their voices carries across the water to the meadows on the far side. Later the market square fills with stalls selling cheese, apples and honey from the farms upstream, and the old men who gather by the fountain argue about the weather, the football and the price of everything, just as their fathers did.

The town council has spent the last decade restoring the old warehouses that line the eastern bank. Some have become apartments, others small workshops where carpenters, potters and weavers sell what they make. The project was not without critics, who argued that the money would have been better spent on the hospital, but most residents now agree that the riverside has come back to life.

History is never far away here. The church at the top of the hill was built in the twelfth century, and its tower still holds the bell that warned the valley of floods. In the museum next to the town hall, visitors can see maps that show how the course of the river has moved over the centuries, swallowing one village and leaving another stranded in the middle of a field. Local historians have collected letters, diaries and photographs that tell the story of the great flood of 1912, when the water rose higher than anyone had seen before and stayed in the streets for nine days.

Walking along the towpath on a summer evening, it is easy to understand why so many families have stayed for generations. The light turns gold on the water, swallows dive over the reeds, and the sound of a distant train is the only reminder that the modern world lies just beyond the hills. Newcomers often say that they came for a weekend and never left. The river, as the older residents like to say, has a way of keeping people. Whether that is a blessing or a curse depends on whom you ask, but few of those who leave ever forget the sound of the water under the bridge at night. For many of them it is simply the sound of home, and they return to it as often as they can, bringing their children to see the place where their own stories began.`;

const FRENCH = `La rivière qui traverse la vieille ville a façonné la vie des habitants depuis plus de mille ans. Les agriculteurs comptaient autrefois sur ses crues de printemps pour arroser leurs champs, et les marchands utilisaient son courant lent pour transporter le grain, la laine et le bois jusqu'à la côte. Aujourd'hui les péniches ont disparu, mais la rivière décide encore où les routes tournent et où les maisons se dressent. Le matin, quand la brume est basse sur l'eau, la ville est calme et quelques pêcheurs s'assoient sur les marches de pierre sous le pont.`;

const GERMAN = `Der Fluss, der durch die alte Marktstadt fließt, hat das Leben der Menschen an seinen Ufern seit mehr als tausend Jahren geprägt. Bauern waren einst auf seine Frühjahrshochwasser angewiesen, um ihre Felder zu bewässern, und Händler nutzten seine langsame Strömung, um Getreide, Wolle und Holz bis zur Küste zu bringen. Heute sind die Lastkähne verschwunden, aber der Fluss bestimmt noch immer, wo die Straßen abbiegen und wo die Häuser stehen. Am frühen Morgen, wenn der Nebel tief über dem Wasser liegt, ist die Stadt ruhig.`;

/** Distinct made-up words of exactly `length` letters, the same every run. */
function distinctWords(count: number, length: number, seed = 7): string[] {
  const random = seededRandom(seed);
  const words = new Set<string>();
  while (words.size < count) {
    let word = '';
    for (let i = 0; i < length; i++) word += String.fromCharCode(97 + randomInt(random, 26));
    words.add(word);
  }
  return [...words];
}

/** `count` words for the quality rule: two stop words, then filler of mean length 5. */
function prose(count: number): string[] {
  const filler = ['river', 'stone', 'field', 'grain', 'water', 'bread'];
  return Array.from({ length: count }, (_, i) => (i === 0 ? 'the' : i === 1 ? 'and' : filler[i % filler.length]!));
}

/** Only one check of the repetition rule at a time: every other limit is switched off. */
const REPETITION_OFF = {
  maxDuplicateParagraphRatio: 1,
  maxDuplicateLineRatio: 1,
  maxDuplicateParagraphCharRatio: 1,
  maxDuplicateLineCharRatio: 1,
  topNgrams: [],
  duplicateNgrams: [],
};

/** The same for the FineWeb rule. */
const FINEWEB_OFF = { minLinePunctuationRatio: 0, maxShortLineRatio: 1, maxDuplicateLineCharRatio: 1, maxNewlineWordRatio: 1_000 };

function removal(result: { readonly keep: true } | Removed): string {
  return result.keep ? 'kept' : `${result.rule}/${result.reason}`;
}

// ---------------------------------------------------------------------------------------------
// Text.

describe('refinery text splitting', () => {
  it('splits words over whitespace and counts only those with a non-punctuation character', () => {
    assert.deepEqual(splitWords("  Hello,\tworld -- it is 5 o'clock...\n"), ['Hello,', 'world', '--', 'it', 'is', '5', "o'clock..."]);
    assert.deepEqual(countedWords('a -- | # ... » 42 ok!'), ['a', '42', 'ok!']);
    assert.equal(isCountedWord('—'), false);
    assert.equal(isCountedWord('#tag'), true);
  });

  it('measures length in code points and splits paragraphs on blank lines', () => {
    assert.equal(charLength('a😀b'), 3);
    assert.deepEqual(splitParagraphs('one\ntwo\n\n \nthree\n\n\n'), ['one\ntwo', 'three']);
  });

  it('counts sentences at . ! ? followed by space, plus trailing words', () => {
    assert.equal(countSentences('One. Two! Three? "Four." Five'), 5);
    assert.equal(countSentences('Menu\nHome\nAbout us'), 1);
    assert.equal(countSentences('... - .'), 0);
  });
});

describe('refinery n-gram statistics', () => {
  /** The same statistics keyed by the joined words: simple, and slow on long documents. */
  function naiveTop(words: string[], n: number): number {
    const total = words.reduce((sum, w) => sum + charLength(w), 0);
    const counts = new Map<string, number>();
    for (let i = 0; i + n <= words.length; i++) {
      const key = words.slice(i, i + n).join(' ');
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
    // The highest count; of those tied, the n-gram seen first (a Map iterates in insertion order).
    let top: [string, number] | undefined;
    for (const entry of counts) if (entry[1] > 1 && (!top || entry[1] > top[1])) top = entry;
    return !top || total === 0 ? 0 : ((charLength(top[0]) - (n - 1)) * top[1]) / total;
  }
  function naiveDuplicate(words: string[], n: number): number {
    const total = words.reduce((sum, w) => sum + charLength(w), 0);
    const seen = new Set<string>();
    const covered = new Array<boolean>(words.length).fill(false);
    for (let i = 0; i + n <= words.length; i++) {
      const key = words.slice(i, i + n).join(' ');
      if (seen.has(key)) for (let j = i; j < i + n; j++) covered[j] = true;
      seen.add(key);
    }
    return total === 0 ? 0 : words.reduce((sum, w, i) => sum + (covered[i] ? charLength(w) : 0), 0) / total;
  }

  it('agrees with a naive version keyed by the words themselves', () => {
    const random = seededRandom(11);
    for (let trial = 0; trial < 40; trial++) {
      // A small vocabulary, so that n-grams repeat often.
      const vocabulary = ['a', 'bb', 'ccc', 'dddd', 'ee', 'f'].slice(0, 2 + (trial % 5));
      const words = Array.from({ length: 5 + randomInt(random, 200) }, () => vocabulary[randomInt(random, vocabulary.length)]!);
      const sequence = toWordSequence(words);
      for (const n of [1, 2, 3, 4, 5, 7, 10]) {
        assert.ok(Math.abs(topNgramCharFraction(sequence, n) - naiveTop(words, n)) < 1e-12, `top ${n}-gram, trial ${trial}`);
        assert.ok(Math.abs(duplicateNgramCharFraction(sequence, n) - naiveDuplicate(words, n)) < 1e-12, `duplicate ${n}-gram, trial ${trial}`);
      }
    }
  });

  it('never gives a larger repeated-n-gram fraction for a larger n (the repetition rule skips on it)', () => {
    const random = seededRandom(13);
    for (let trial = 0; trial < 200; trial++) {
      const vocabulary = ['a', 'bb', 'ccc', 'dddd', 'ee', 'f', 'gg'].slice(0, 2 + (trial % 6));
      const sequence = toWordSequence(Array.from({ length: 1 + randomInt(random, 300) }, () => vocabulary[randomInt(random, vocabulary.length)]!));
      for (let n = 1; n < 12; n++)
        assert.ok(duplicateNgramCharFraction(sequence, n + 1) <= duplicateNgramCharFraction(sequence, n), `n = ${n}, trial ${trial}`);
    }
  });

  it('finds the top n-gram of a hand-worked example', () => {
    // "ab cd ab cd ab": "ab cd" occurs twice, "ab" three times: 2 chars x 3 / 10 chars = 0.6.
    const words = toWordSequence(['ab', 'cd', 'ab', 'cd', 'ab']);
    assert.equal(topNgramCharFraction(words, 1), 0.6);
    // "ab cd" and "cd ab" twice each; the first seen, "ab cd", is taken: 4 x 2 / 10 = 0.8.
    assert.deepEqual([...firstOccurrences(words.ids, 2)], [0, 1, 0, 1]);
    assert.equal(topNgramCharFraction(words, 2), 0.8);
    // 3-grams "ab cd ab" (0) and again at 2: words 2..4 are duplicates, 6 of 10 chars.
    assert.equal(duplicateNgramCharFraction(words, 3), 0.6);
    assert.equal(firstOccurrences(words.ids, 6).length, 0);
  });
});

// ---------------------------------------------------------------------------------------------
// Gopher quality.

describe('gopher-quality filter', () => {
  const apply = (words: string[], params = {}) => gopherQualityFilter.apply(words.join(' '), { ...gopherQualityFilter.defaults, ...params });
  const reason = (result: ReturnType<typeof apply>) => (result.keep ? 'kept' : result.reason);

  it('keeps 50 words and removes 49; keeps 100,000 and removes 100,001', () => {
    assert.equal(reason(apply(prose(50))), 'kept');
    assert.equal(reason(apply(prose(49))), 'too_few_words');
    // Punctuation-only words do not count toward the 50.
    assert.equal(reason(apply([...prose(49), '--', '|'])), 'too_few_words');
    assert.equal(reason(apply(prose(100_000))), 'kept');
    assert.equal(reason(apply(prose(100_001))), 'too_many_words');
  });

  it('keeps a mean word length of exactly 3 and exactly 10, removes just outside', () => {
    const threes = ['the', 'and', ...Array.from({ length: 48 }, () => 'cat')];
    assert.equal(reason(apply(threes)), 'kept');
    assert.equal(reason(apply([...threes.slice(0, 49), 'at'])), 'mean_word_length');
    // 3 + 3 + 46 x 10 + 2 x 17 = 500 characters over 50 words.
    const tens = ['the', 'and', ...Array.from({ length: 46 }, () => 'riverbanks'), 'a'.repeat(17), 'b'.repeat(17)];
    assert.equal(reason(apply(tens)), 'kept');
    assert.equal(reason(apply([...tens.slice(0, 49), 'b'.repeat(18)])), 'mean_word_length');
  });

  it("keeps 5 '#' in 50 words and removes 6; the same for ellipses", () => {
    const tagged = (count: number, mark: string) => prose(50).map((word, i) => (i >= 2 && i < 2 + count ? `${word}${mark}` : word));
    assert.equal(reason(apply(tagged(5, '#'))), 'kept');
    assert.equal(reason(apply(tagged(6, '#'))), 'hash_ratio');
    assert.equal(reason(apply(tagged(5, '...'))), 'kept');
    assert.equal(reason(apply(tagged(6, '…'))), 'ellipsis_ratio');
  });

  it('keeps 90 bullet lines in 100 and removes 91', () => {
    const lines = (bullets: number) => Array.from({ length: 100 }, (_, i) => `${i < bullets ? (i % 2 ? '- ' : '• ') : ''}the river and the field`).join('\n');
    assert.equal(reason(gopherQualityFilter.apply(lines(90))), 'kept');
    assert.equal(reason(gopherQualityFilter.apply(lines(91))), 'bullet_lines');
  });

  it('keeps 3 of 10 lines ending in an ellipsis and removes 4', () => {
    const lines = (ellipses: number) =>
      Array.from({ length: 10 }, (_, i) => `the river and the field of grain and water${i < ellipses ? '...' : '.'}`).join('\n');
    assert.equal(reason(gopherQualityFilter.apply(lines(3))), 'kept');
    assert.equal(reason(gopherQualityFilter.apply(lines(4))), 'ellipsis_lines');
  });

  it('keeps 80% of words with a letter and removes 78%', () => {
    const numbered = (count: number) => prose(50).map((word, i) => (i >= 2 && i < 2 + count ? '1234' : word));
    assert.equal(reason(apply(numbered(10))), 'kept');
    assert.equal(reason(apply(numbered(11))), 'non_alpha_words');
  });

  it('needs two distinct stop words, not two occurrences', () => {
    const onlyThe = prose(50).map((word, i) => (i === 1 ? 'The,' : word));
    assert.equal(reason(apply(onlyThe)), 'stop_words');
    assert.equal(reason(apply(onlyThe.map((word, i) => (i === 5 ? 'With' : word)))), 'kept');
  });
});

// ---------------------------------------------------------------------------------------------
// Gopher repetition.

describe('gopher-repetition filter', () => {
  const apply = (text: string, params = {}) => gopherRepetitionFilter.apply(text, { ...gopherRepetitionFilter.defaults, ...REPETITION_OFF, ...params });
  const reason = (result: ReturnType<typeof apply>) => (result.keep ? 'kept' : result.reason);
  const vocabulary = distinctWords(400, 5);
  const line = (i: number) => vocabulary.slice(i * 10, i * 10 + 10).join(' ');

  it('keeps 3 repeated lines in 10 and removes 4 in 11', () => {
    const text = (repeats: number) => [...Array.from({ length: 6 }, (_, i) => line(i)), ...Array.from({ length: repeats + 1 }, () => 'read more')].join('\n');
    assert.equal(reason(apply(text(3), { maxDuplicateLineRatio: 0.3 })), 'kept');
    assert.equal(reason(apply(text(4), { maxDuplicateLineRatio: 0.3 })), 'duplicate_lines');
  });

  it('keeps 20% of line characters in repeats and removes just over', () => {
    // Ten lines of 59 characters, two of them repeats: 0.2 exactly.
    const lines = [...Array.from({ length: 8 }, (_, i) => line(i)), line(0), line(1)];
    assert.equal(reason(apply(lines.join('\n'), { maxDuplicateLineCharRatio: 0.2 })), 'kept');
    // The same, with the repeated line two characters longer: 120 / 594 = 0.202.
    const longer = [`${line(0)} x`, ...lines.slice(1, 8), `${line(0)} x`, line(1)];
    assert.equal(reason(apply(longer.join('\n'), { maxDuplicateLineCharRatio: 0.2 })), 'duplicate_line_chars');
  });

  it('applies the same limits to paragraphs', () => {
    // Paragraphs of equal length: `repeats` copies of the first after `distinct` different ones.
    const paragraphs = (distinct: number, repeats: number) =>
      [...Array.from({ length: distinct }, (_, i) => line(i)), ...Array.from({ length: repeats }, () => line(0))].join('\n\n');
    assert.equal(reason(apply(paragraphs(7, 3), { maxDuplicateParagraphRatio: 0.3 })), 'kept');
    assert.equal(reason(apply(paragraphs(7, 4), { maxDuplicateParagraphRatio: 0.3 })), 'duplicate_paragraphs');
    assert.equal(reason(apply(paragraphs(8, 2), { maxDuplicateParagraphCharRatio: 0.2 })), 'kept');
    assert.equal(reason(apply(paragraphs(7, 2), { maxDuplicateParagraphCharRatio: 0.2 })), 'duplicate_paragraph_chars');
  });

  // 100 words of 5 letters (500 characters); `phrase` spliced in `count` times, apart.
  function stuffed(phrase: string[], count: number, total = 100): string {
    const filler = vocabulary.slice(0, total - phrase.length * count);
    const words: string[] = [];
    const every = Math.floor(filler.length / count);
    for (let i = 0; i < count; i++) words.push(...phrase, ...filler.slice(i * every, (i + 1) * every));
    words.push(...filler.slice(count * every));
    return words.join(' ');
  }

  it('limits the top 2-, 3- and 4-gram to 20%, 18% and 16% of characters', () => {
    const limits = { topNgrams: gopherRepetitionFilter.defaults.topNgrams };
    // 10 chars x 10 / 500 = 0.20; x 11 = 0.22.
    assert.equal(reason(apply(stuffed(['cheap', 'pills'], 10), limits)), 'kept');
    assert.equal(reason(apply(stuffed(['cheap', 'pills'], 11), limits)), 'top_2gram');
    // 15 x 6 / 500 = 0.18; x 7 = 0.21 (its 2-grams: 10 x 7 / 500 = 0.14).
    assert.equal(
      reason(
        apply(
          stuffed(
            ['buy', 'cheap', 'pills'].map((w) => w.padEnd(5, 'z')),
            6,
          ),
          limits,
        ),
      ),
      'kept',
    );
    assert.equal(reason(apply(stuffed(['buyzz', 'cheap', 'pills'], 7), limits)), 'top_3gram');
    // 20 x 4 / 500 = 0.16; x 5 = 0.20 (3-grams 0.15, 2-grams 0.10).
    assert.equal(reason(apply(stuffed(['buyzz', 'cheap', 'pills', 'nowzz'], 4), limits)), 'kept');
    assert.equal(reason(apply(stuffed(['buyzz', 'cheap', 'pills', 'nowzz'], 5), limits)), 'top_4gram');
  });

  it('limits characters in repeated 5-grams to 15% and 10-grams to 10%', () => {
    const limits = { duplicateNgrams: gopherRepetitionFilter.defaults.duplicateNgrams };
    const five = vocabulary.slice(300, 305);
    // Two repeats of 25 characters: 50 / 335 = 0.149 (67 words) and 50 / 330 = 0.152 (66 words).
    assert.equal(reason(apply(stuffed(five, 3, 67), limits)), 'kept');
    assert.equal(reason(apply(stuffed(five, 3, 66), limits)), 'duplicate_5gram');
    const ten = vocabulary.slice(300, 310);
    // One repeat of 50 characters: 50 / 500 = 0.10 (100 words) and 50 / 495 = 0.101 (99 words),
    // which is under the 5- to 9-gram limits (0.15 ... 0.11) and over the 10-gram one.
    assert.equal(reason(apply(stuffed(ten, 2, 100), limits)), 'kept');
    assert.equal(reason(apply(stuffed(ten, 2, 99), limits)), 'duplicate_10gram');
  });

  it('decides as it would measuring every n-gram limit in order (it skips limits a smaller n already meets)', () => {
    // The rule as it was before the skip: every limit measured, the first one exceeded removes.
    const everyLimit = (text: string, params: GopherRepetitionParams): string => {
      const words = toWordSequence(splitWords(text).filter(isCountedWord).map(stripPunctuation));
      for (const { n, maxCharRatio } of params.topNgrams) if (topNgramCharFraction(words, n) > maxCharRatio) return `top_${n}gram`;
      for (const { n, maxCharRatio } of params.duplicateNgrams) if (duplicateNgramCharFraction(words, n) > maxCharRatio) return `duplicate_${n}gram`;
      return 'kept';
    };
    const random = seededRandom(17);
    const limitSets: GopherRepetitionParams['duplicateNgrams'][] = [
      gopherRepetitionFilter.defaults.duplicateNgrams,
      // Out of order, equal n, limits that rise with n: the skip must still give the first removal.
      [
        { n: 8, maxCharRatio: 0.05 },
        { n: 5, maxCharRatio: 0.3 },
        { n: 6, maxCharRatio: 0.02 },
        { n: 6, maxCharRatio: 0.2 },
        { n: 3, maxCharRatio: 0.1 },
        { n: 10, maxCharRatio: 0.4 },
      ],
    ];
    let removed = 0;
    for (let trial = 0; trial < 400; trial++) {
      const size = 3 + (trial % 40);
      const words = Array.from({ length: 20 + randomInt(random, 400) }, () => vocabulary[randomInt(random, size)]!);
      // Now and then a copied stretch, so that long n-grams repeat too.
      if (trial % 3 === 0 && words.length > 60) words.splice(30, 0, ...words.slice(0, 5 + randomInt(random, 25)));
      const text = words.join(' ');
      for (const duplicateNgrams of limitSets) {
        const params = { ...gopherRepetitionFilter.defaults, ...REPETITION_OFF, topNgrams: [], duplicateNgrams };
        const expected = everyLimit(text, params);
        assert.equal(reason(apply(text, params)), expected, `trial ${trial}`);
        if (expected !== 'kept') removed++;
      }
    }
    assert.ok(removed > 100 && removed < 700, `${removed} removals: the sample exercises both outcomes`);
  });
});

// ---------------------------------------------------------------------------------------------
// C4 quality.

describe('c4-quality filter', () => {
  const sentences = (count: number) => Array.from({ length: count }, (_, i) => `This is sentence number ${i + 1} of the page.`).join(' ');

  it('removes navigation, script notices, policy lines and giant words, keeping the rest in order', () => {
    const longWord = 'x'.repeat(1000);
    const page = [
      'Home | About',
      'The river that runs through the old town has shaped the lives of its people.',
      'Please enable JavaScript to see the comments.',
      'Farmers once depended on its spring floods to water their fields.',
      '',
      'By using this site you agree to our Terms of Use.',
      'This site uses cookies to improve your experience.',
      `Here is a token of ${'y'.repeat(1001)} characters.`,
      `Here is a token of ${longWord} characters.`,
      '   Merchants used its slow current to carry grain to the coast.   ',
      'Read more',
      'Today the barges are gone, but the river still decides where the roads bend.',
    ].join('\n');
    const result = c4QualityFilter.apply(page);
    assert.deepEqual(result, {
      keep: true,
      text: [
        'The river that runs through the old town has shaped the lives of its people.',
        'Farmers once depended on its spring floods to water their fields.',
        '',
        `Here is a token of ${longWord} characters.`,
        'Merchants used its slow current to carry grain to the coast.',
        'Today the barges are gone, but the river still decides where the roads bend.',
      ].join('\n'),
      linesRemoved: { too_few_words: 2, javascript: 1, policy: 2, long_word: 1 },
    });
  });

  it('keeps a line of 3 words and removes one of 2', () => {
    const result = c4QualityFilter.apply(`${sentences(5)}\nthree words here\ntwo words`);
    assert.ok(result.keep);
    assert.equal(result.text, `${sentences(5)}\nthree words here`);
    assert.deepEqual(result.linesRemoved, { too_few_words: 1 });
  });

  it('removes lines without terminal punctuation only when asked, and lines ending in an ellipsis with them', () => {
    const page = `${sentences(5)}\nA line with no full stop\nA line that trails off...\nA line in "quotes"\nIs this a question?`;
    assert.deepEqual(c4QualityFilter.apply(page), { keep: true, linesRemoved: {} });
    const strict = c4QualityFilter.apply(page, { ...c4QualityFilter.defaults, removeLinesWithoutTerminalPunctuation: true });
    assert.ok(strict.keep);
    assert.equal(strict.text, `${sentences(5)}\nA line in "quotes"\nIs this a question?`);
    assert.deepEqual(strict.linesRemoved, { no_terminal_punctuation: 2 });
  });

  it('removes the document for lorem ipsum, a curly bracket, or fewer than 5 sentences left', () => {
    const drop = (text: string) => {
      const result = c4QualityFilter.apply(text);
      return result.keep ? 'kept' : result.reason;
    };
    assert.equal(drop(sentences(5)), 'kept');
    assert.equal(drop(sentences(4)), 'too_few_sentences');
    // Five sentences, but one is on a line that is removed.
    assert.equal(drop(`${sentences(4)}\nPlease enable JavaScript to continue.`), 'too_few_sentences');
    assert.equal(drop(`${sentences(5)}\nLorem Ipsum dolor sit amet.`), 'lorem_ipsum');
    assert.equal(drop(`${sentences(5)}\nvar x = { a: 1 };`), 'curly_bracket');
  });
});

// ---------------------------------------------------------------------------------------------
// FineWeb quality.

describe('fineweb-quality filter', () => {
  const apply = (lines: string[], params = {}) => finewebQualityFilter.apply(lines.join('\n'), { ...finewebQualityFilter.defaults, ...FINEWEB_OFF, ...params });
  const reason = (result: ReturnType<typeof apply>) => (result.keep ? 'kept' : result.reason);
  const vocabulary = distinctWords(1000, 5, 3);
  // Distinct lines of 6 words, 35 characters: long, and without terminal punctuation.
  const longLine = (i: number) => vocabulary.slice(i * 6, i * 6 + 6).join(' ');

  it('keeps 12 punctuated lines in 100 and removes 11', () => {
    const lines = (punctuated: number) => Array.from({ length: 100 }, (_, i) => `${longLine(i)}${i < punctuated ? '.' : ''}`);
    assert.equal(reason(apply(lines(12), { minLinePunctuationRatio: 0.12 })), 'kept');
    assert.equal(reason(apply(lines(11), { minLinePunctuationRatio: 0.12 })), 'line_punctuation');
  });

  it('keeps 67 short lines in 100 and removes 68', () => {
    // A short line is at most 30 characters: 5 words of 5 letters and 4 spaces make 29.
    const lines = (short: number) => Array.from({ length: 100 }, (_, i) => (i < short ? longLine(i).slice(0, 30) : longLine(i)));
    assert.equal(charLength(longLine(0).slice(0, 30)), 30);
    assert.equal(reason(apply(lines(67), { maxShortLineRatio: 0.67 })), 'kept');
    assert.equal(reason(apply(lines(68), { maxShortLineRatio: 0.67 })), 'short_lines');
  });

  it('keeps 1% of line characters in repeats and removes just over (the code 0.01, not the paper 0.1)', () => {
    const hundred = [...Array.from({ length: 99 }, (_, i) => longLine(i)), longLine(0)];
    assert.equal(reason(apply(hundred, { maxDuplicateLineCharRatio: 0.01 })), 'kept');
    const ninetyNine = [...hundred.slice(0, 98), longLine(0)];
    assert.equal(reason(apply(ninetyNine, { maxDuplicateLineCharRatio: 0.01 })), 'duplicate_line_chars');
    assert.equal(finewebQualityFilter.defaults.maxDuplicateLineCharRatio, 0.01);
  });

  it('keeps 0.3 newlines per word and removes more', () => {
    // Four lines of 25 words (100 words, 3 newlines), padded with blank lines to 30 and 31 newlines.
    const body = Array.from({ length: 4 }, (_, i) => vocabulary.slice(i * 25, i * 25 + 25).join(' '));
    const padded = (newlines: number) => [...body.slice(0, 3), ...Array.from({ length: newlines - 3 }, () => ''), body[3]!];
    assert.equal(reason(apply(padded(30), { maxNewlineWordRatio: 0.3 })), 'kept');
    assert.equal(reason(apply(padded(31), { maxNewlineWordRatio: 0.3 })), 'newline_ratio');
  });
});

// ---------------------------------------------------------------------------------------------
// Language ID.

describe('language filter', () => {
  it('keeps English and removes French and German, naming the language detected', () => {
    assert.deepEqual(languageFilter.apply(CLEAN_ENGLISH), { keep: true });
    for (const [text, code] of [
      [FRENCH, 'fr'],
      [GERMAN, 'de'],
    ] as const) {
      const result = languageFilter.apply(text);
      assert.equal(result.keep, false);
      assert.ok(!result.keep && result.reason === 'language' && result.detail?.startsWith(`detected ${code} `), JSON.stringify(result));
    }
  });

  it('keeps another language when configured, and removes English below the confidence asked for', () => {
    assert.deepEqual(languageFilter.apply(FRENCH, { languages: ['fr'], minConfidence: 0.65 }), { keep: true });
    // Mostly English with a Spanish sentence: English at about 0.85.
    const mixed = `${CLEAN_ENGLISH.split('\n\n')[0]} El río atraviesa el casco antiguo y la gente que vive allí siempre ha dependido de él para el agua.`;
    assert.deepEqual(languageFilter.apply(mixed), { keep: true });
    const strict = languageFilter.apply(mixed, { languages: ['en'], minConfidence: 0.99 });
    assert.ok(!strict.keep && strict.reason === 'language_confidence', JSON.stringify(strict));
  });
});

// ---------------------------------------------------------------------------------------------
// All of them.

describe('applyFilters', () => {
  it('keeps a clean English page unchanged, through every rule in order', () => {
    const result = applyFilters(CLEAN_ENGLISH);
    assert.deepEqual(result, {
      keep: true,
      text: CLEAN_ENGLISH,
      changed: false,
      linesRemoved: {},
      // The language rule is at version 2 since it became fastText's lid.176.
      rules: FILTER_ORDER.map((name) => ({ name, version: name === 'language' ? 2 : 1 })),
    });
  });

  it('removes spam with the rule that catches it', () => {
    const paragraphs = CLEAN_ENGLISH.split('\n\n');
    // Keyword stuffing: "car insurance" is 28% of the words' characters.
    const stuffing = `Looking for cheap car insurance? We compare cheap car insurance quotes from the top providers so that you can find cheap car insurance in minutes. Cheap car insurance does not have to mean poor cover: our cheap car insurance deals include breakdown cover and a courtesy car. Drivers with points can still get cheap car insurance with us, and young drivers save the most on cheap car insurance. Get your cheap car insurance quote today and join thousands of happy drivers who found cheap car insurance online with the best car insurance comparison site for cheap car insurance.`;
    assert.equal(removal(applyFilters(stuffing)), 'gopher-repetition/top_2gram');
    // The same lines over and over: a boilerplate footer repeated under each post.
    const footer = 'Share this post with your friends and family on social media today.';
    assert.equal(removal(applyFilters(paragraphs.map((p) => `${p}\n${footer}\n${footer}`).join('\n'))), 'gopher-repetition/duplicate_lines');
    // A template page with its placeholder left in.
    assert.equal(removal(applyFilters(`${CLEAN_ENGLISH}\n\nLorem ipsum dolor sit amet, consectetur adipiscing elit.`)), 'c4-quality/lorem_ipsum');
    // Placeholder text alone is Latin, and language ID sees that first.
    const lorem =
      'Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat. Duis aute irure dolor in reprehenderit in voluptate velit esse cillum dolore eu fugiat nulla pariatur.';
    assert.equal(removal(applyFilters(lorem)), 'language/language');
    // A link farm: a list of anchor texts, one per line.
    const places = ['London', 'Paris', 'Berlin', 'Madrid', 'Rome', 'Vienna', 'Prague', 'Lisbon', 'Dublin', 'Athens', 'Oslo', 'Warsaw'];
    const services = ['cheap flights to', 'best hotels in', 'car hire in', 'last minute deals for', 'top restaurants in'];
    const farm = services.flatMap((service) => places.map((place) => `- ${service} ${place}`)).join('\n');
    // The anchor texts are English to language ID (0.86); the repeated template is what catches
    // the farm, with or without language ID.
    assert.equal(removal(applyFilters(farm)), 'gopher-repetition/top_4gram');
    const withoutLanguage = { enabled: FILTER_ORDER.filter((name) => name !== 'language') };
    assert.equal(removal(applyFilters(farm, withoutLanguage)), 'gopher-repetition/top_4gram');
  });

  it('removes French and German by language ID', () => {
    assert.equal(removal(applyFilters(FRENCH)), 'language/language');
    assert.equal(removal(applyFilters(GERMAN)), 'language/language');
  });

  it('returns the text after C4 line removal, with the lines removed', () => {
    const page = `Home | About\n${CLEAN_ENGLISH}\nThis site uses cookies.`;
    const result = applyFilters(page);
    assert.ok(result.keep);
    assert.equal(result.text, CLEAN_ENGLISH);
    assert.equal(result.changed, true);
    assert.deepEqual(result.linesRemoved, { too_few_words: 1, policy: 1 });
    // Windows line ends come back as '\n'.
    const crlf = applyFilters(CLEAN_ENGLISH.replaceAll('\n', '\r\n'));
    assert.ok(crlf.keep && crlf.changed && crlf.text === CLEAN_ENGLISH);
  });

  it('runs only the enabled rules, in the fixed order', () => {
    const result = applyFilters(`Home | About\n${CLEAN_ENGLISH}`, { enabled: ['fineweb-quality', 'c4-quality'] });
    assert.ok(result.keep);
    assert.deepEqual(
      result.rules.map((rule) => rule.name),
      ['c4-quality', 'fineweb-quality'],
    );
    assert.equal(removal(applyFilters('Short.', { enabled: [] })), 'kept');
  });

  it('removes an empty or all-whitespace document with reason empty', () => {
    assert.deepEqual(applyFilters(''), { keep: false, rule: 'input', version: 1, reason: 'empty', detail: 'the document is empty or all whitespace' });
    assert.equal(removal(applyFilters(' \n\t\r\n ')), 'input/empty');
    assert.equal(removal(gopherQualityFilter.apply('   ')), 'gopher-quality/empty');
  });

  it('throws a ConfigError naming the field for a non-string, an oversize document or a bad threshold', () => {
    for (const value of [undefined, null, 42, { text: 'x' }, ['x']]) {
      assert.throws(
        () => applyFilters(value, {}, 'records[3].text'),
        (error: unknown) => {
          assert.ok(error instanceof ConfigError);
          assert.equal(error.field, 'records[3].text');
          assert.match(error.message, /must be a string/);
          return true;
        },
      );
    }
    assert.throws(
      () => applyFilters('a'.repeat(1001), { maxDocumentChars: 1000 }),
      /^ConfigError: document: must be at most 1000 characters \(got "1001 characters"\)$/,
    );
    assert.equal(removal(applyFilters('a'.repeat(1000), { maxDocumentChars: 1000 })), 'language/language_confidence');
    assert.throws(() => applyFilters(CLEAN_ENGLISH, { gopherQuality: { minWords: -1 } }), /config\.gopherQuality\.minWords/);
    assert.throws(() => applyFilters(CLEAN_ENGLISH, { enabled: ['gopher'] } as never), /config\.enabled\.0/);
    assert.throws(
      () => applyFilters(CLEAN_ENGLISH, { gopherQuality: { minWords: 10, maxWords: 5 } }),
      /config\.gopherQuality\.minWords: minWords must not exceed maxWords/,
    );
    assert.throws(() => gopherQualityFilter.apply(7 as never), /document: must be a string, not number/);
  });

  it('has every threshold in FilterConfig, with the reference defaults', () => {
    const config = FilterConfig.parse({});
    assert.deepEqual(config.enabled, [...FILTER_ORDER]);
    assert.equal(config.language.minConfidence, 0.65);
    assert.deepEqual(config.language.languages, ['en']);
    assert.equal(config.gopherQuality.minWords, 50);
    assert.equal(config.gopherRepetition.duplicateNgrams.at(-1)!.maxCharRatio, 0.1);
    assert.equal(config.c4Quality.removeLinesWithoutTerminalPunctuation, false);
    assert.equal(config.finewebQuality.maxShortLineRatio, 0.67);
    assert.equal(FilterConfig.parse({ c4Quality: { minSentences: 3 } }).c4Quality.minWordsPerLine, 3);
  });

  it('processes a 100,000-word document quickly, and a realistic page at a steady rate (printed)', () => {
    const vocabulary = CLEAN_ENGLISH.split(/\s+/);
    const random = seededRandom(5);
    const lines: string[] = [];
    for (let words = 0; words < 100_000; words += 20) {
      lines.push(`${Array.from({ length: 20 }, () => vocabulary[randomInt(random, vocabulary.length)]).join(' ')}.`);
    }
    const big = lines.join('\n');
    assert.equal(splitWords(big).length, 100_000);
    let start = performance.now();
    const result = applyFilters(big);
    const bigMs = performance.now() - start;
    assert.equal(removal(result), 'kept');

    start = performance.now();
    let pages = 0;
    while (performance.now() - start < 500) {
      assert.ok(applyFilters(CLEAN_ENGLISH).keep);
      pages++;
    }
    const perSecond = pages / ((performance.now() - start) / 1000);
    console.log(
      `refinery filters: 100,000-word document (${big.length} characters) in ${bigMs.toFixed(0)} ms; ${splitWords(CLEAN_ENGLISH).length}-word page: ${perSecond.toFixed(0)} documents/s`,
    );
  });
});

describe('applyFilters fast paths', () => {
  // Documents that stop at each rule, and clean ones, with and without '\r\n' line ends.
  const documents = [
    CLEAN_ENGLISH,
    CLEAN_ENGLISH.replace(/\n/g, '\r\n'),
    `${CLEAN_ENGLISH}\n\nPlease enable JavaScript to view this page.\nHome | About\nRead our privacy policy.`,
    `${CLEAN_ENGLISH}\n\nLorem ipsum dolor sit amet.`,
    FRENCH,
    GERMAN,
    `${'buy cheap insurance now '.repeat(80)}`,
    CLEAN_ENGLISH.split('\n\n')
      .map((p) => `${p}\nShare this\nShare this`)
      .join('\n\n'),
    CLEAN_ENGLISH.split('. ').join('.\n'),
    '   \n  ',
  ];
  const configs: FilterConfigInput[] = [
    {},
    { c4Quality: { removeLinesWithoutTerminalPunctuation: true } },
    { enabled: ['fineweb-quality', 'c4-quality', 'gopher-quality'] },
    { language: { minConfidence: 0.99 }, gopherQuality: { minWords: 400 } },
  ];

  it('a config object reused for every document gives what a fresh copy of it gives each time', () => {
    for (const input of configs) {
      const reused = FilterConfig.parse(input);
      for (const text of documents) {
        assert.deepEqual(applyFilters(text, reused), applyFilters(text, structuredClone(input)));
        assert.deepEqual(applyFilters(text, input), applyFilters(text, structuredClone(input)));
      }
    }
  });

  it('a bad config is still a ConfigError after a good one was used', () => {
    applyFilters(CLEAN_ENGLISH, {});
    assert.throws(
      () => applyFilters(CLEAN_ENGLISH, { gopherQuality: { minWords: -1 } }),
      (error: unknown) => error instanceof ConfigError,
    );
  });

  it('the chain, sharing one view of the text, gives what each rule alone gives in order', () => {
    const config = FilterConfig.parse({});
    const alone = {
      language: languageFilter,
      'gopher-repetition': gopherRepetitionFilter,
      'gopher-quality': gopherQualityFilter,
      'c4-quality': c4QualityFilter,
      'fineweb-quality': finewebQualityFilter,
    };
    const params = {
      language: config.language,
      'gopher-repetition': config.gopherRepetition,
      'gopher-quality': config.gopherQuality,
      'c4-quality': config.c4Quality,
      'fineweb-quality': config.finewebQuality,
    };
    for (const document of documents.filter((d) => d.trim() !== '')) {
      let text = document.replace(/\r\n/g, '\n');
      let expected: unknown;
      for (const name of FILTER_ORDER) {
        const result = (alone[name] as { apply(text: string, params: unknown): { keep: boolean; text?: string } }).apply(text, params[name]);
        if (!result.keep) {
          expected = result;
          break;
        }
        if (result.text !== undefined) text = result.text;
      }
      const chained = applyFilters(document, config);
      if (expected) assert.deepEqual(chained, expected);
      else assert.ok(chained.keep && chained.text === text);
    }
  });
});
