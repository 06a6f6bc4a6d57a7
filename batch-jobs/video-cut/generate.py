"""The local default source set: synthetic videos whose every cut is known by construction.

Each video is a sequence of shots drawn by ffmpeg's own sources (testsrc2, mandelbrot, life,
cellauto, gradients, sierpinski, SMPTE bars, coloured noise), joined by hard cuts and encoded once
(25 fps, 640x360, H.264 yuv420p, no audio). Inside a shot the picture moves: the source's own
animation, a pan across a larger canvas or a zoom, scrolling drawtext, sometimes a partial fade-in.
Besides the good shots every video holds shots made to be dropped, each labelled in truth.json:

- `short`: good content lasting 20-37 frames (0.8-1.5 s), under any sensible minimum clip length
  but long enough to have two detectable cuts;
- `static`: one frame of a source held (normal exposure, no motion);
- `dark`: black with faint grain, or a moving source crushed to under 8% of full scale;
- `washed-out`: near-white with faint grain, or a moving source lifted into the top 15%;
- `duplicate`: a whole good shot (at most 12 s) of an earlier video, drawn again from the same
  parameters with +0.04 brightness and that video's own quality setting, so the bytes differ but
  the picture is the same: a re-upload of the same clip.

Rules that keep every cut visible: neighbouring shots never share a source, dark shots never
touch, and a fade to or from black happens only at the very start and end of a video (fades inside
shots are partial). Every video is deterministic from (seed, index): the plan is drawn with
random.Random, and every ffmpeg source gets an explicit seed.

make_bad_inputs() writes the files a source list may hold that are not usable videos, for tests.
"""
from __future__ import annotations

import hashlib
import os
import random
import subprocess
import tempfile
import time
from dataclasses import dataclass, field as dataclass_field
from typing import Any, Callable

from media import ffmpeg
from spec import SpecError, integer, only, span

FPS = 25
WIDTH, HEIGHT = 640, 360
# A pan crops the frame out of a canvas 1.2 times larger (the sources draw at canvas size).
PAN_W, PAN_H = 768, 432
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf"
GOOD_SOURCES = ("testsrc2", "mandelbrot", "life", "cellauto", "gradients", "sierpinski", "bars", "noise")
# Sources whose picture does not move by itself: a good shot of one always pans or zooms.
STILL_SOURCES = {"bars"}
# Fixed test patterns: each shot shows its own region of one (see content()).
PATTERN_SOURCES = {"testsrc2", "bars"}
# A duplicate repeats a whole earlier good shot, so it is cut into the same one clip: at most
# this long (the good shots' default maximum, under the clips' 15 s).
DUPLICATE_MAX_FRAMES = 12 * 25
STATIC_SOURCES = ("testsrc2", "mandelbrot", "gradients", "sierpinski", "bars", "life")
DROP_KINDS = ("dark", "static", "duplicate", "washed-out")
KINDS = ("good", "short", *DROP_KINDS)
SHORT_FRAMES = (20, 37)
DROP_SECONDS = (2.5, 4.5)
LONG_SHOT_SECONDS = (16.0, 20.0)
VIDEO_FADE_FRAMES = 15
# The longest video the default spec (the one the pipeline submits) can plan, in seconds: its drops
# are a short (at most 1.48 s) and two kinds in turn, so at most one duplicate (a repeat of up to
# 12 s) and one other (4.5 s); one long shot of 20 s; good shots up to the 25 s target; and one
# more 2.5 s shot when none is short enough to repeat: 40.5 s at most, with room to 60. Measured
# over seeds 0-39 x 200 videos: 39.2 s. The plan's bound on Claude's captions reads it
# (pipelines/video/plan.ts: GENERATED_MAX_SECONDS, checked equal by a test).
DEFAULT_SPEC_MAX_SECONDS = 60
# Points of the Mandelbrot set to zoom into (x, y), and how slowly (ffmpeg's end_pts, seconds).
# With maxiter 128 a deep zoom turns into flat colour and stops moving: zooming by end_pts 40-160
# froze 8-12 s into a shot at these and three other points (motion 0-0.46, the static rule's
# threshold is 0.4), so good shots were in truth static. At end_pts 320 these four still moved
# 15-19 s in (motion 13-27, aesthetic 7.3-9.0); the other three points froze earlier and are gone.
MANDELBROT_POINTS = ((-0.743643887037158, 0.131825904205311), (-0.7453, 0.1127), (-0.1011, 0.9563), (-0.235125, 0.827215))
MANDELBROT_END_PTS = (300.0, 360.0)
WORDS = ("aurora", "basalt", "cobalt", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper", "kelvin",
         "lumen", "meridian", "nebula", "orchid", "prism", "quartz", "raven", "sienna", "tundra", "umber", "vertex")

GENERATE_FIELDS = {"stage", "videos", "seed", "videoSeconds", "shotSeconds", "longShotEvery", "dropShots", "crf"}


@dataclass(frozen=True)
class GenerateSpec:
    """What the generate stage draws."""

    videos: int
    """How many videos."""
    seed: int
    """Everything drawn follows from it: the same seed gives the same files."""
    video_seconds: tuple[float, float] = (15.0, 25.0)
    """Each video's length is drawn in this range (a long shot can make it longer)."""
    shot_seconds: tuple[float, float] = (2.5, 12.0)
    """A good shot's length is drawn in this range."""
    long_shot_every: int = 3
    """Videos 0, k, 2k, ... hold one good shot of 16-20 s (longer than the usual 15 s clip
    maximum, so splitting gets exercised); 0: none."""
    drop_shots: int = 3
    """Shots per video made to be dropped: one `short`, then kinds in turn from DROP_KINDS."""
    crf: tuple[int, int] = (21, 26)
    """Each video's x264 quality is drawn in this range, so a duplicate is encoded differently."""

    @staticmethod
    def parse(spec: dict) -> "GenerateSpec":
        only(spec, GENERATE_FIELDS)
        video_seconds = span(spec, "videoSeconds", (15.0, 25.0), 3.0, 600.0)
        shot_seconds = span(spec, "shotSeconds", (2.5, 12.0), 2.5, 60.0)
        crf = span(spec, "crf", (21.0, 26.0), 0.0, 51.0)
        if crf != (int(crf[0]), int(crf[1])):
            raise SpecError(f"crf: expected two integers (got {spec['crf']!r})")
        return GenerateSpec(videos=integer(spec, "videos", None, 1, 1000), seed=integer(spec, "seed", None, 0, 2**31 - 1),
                            video_seconds=video_seconds, shot_seconds=shot_seconds,
                            long_shot_every=integer(spec, "longShotEvery", 3, 0, 1000),
                            drop_shots=integer(spec, "dropShots", 3, 0, 8), crf=(int(crf[0]), int(crf[1])))


@dataclass
class Shot:
    """One shot of a planned video: what draws it and where it lies."""

    kind: str
    frames: int
    source: str = ""
    params: dict = dataclass_field(default_factory=dict)
    duplicate_of: dict | None = None
    start: int = 0

    def truth(self) -> dict:
        return {"startFrame": self.start, "endFrame": self.start + self.frames, "kind": self.kind, "source": self.source,
                "motion": self.params.get("motion", "none"), "text": self.params.get("text"),
                "variant": self.params.get("variant"), "duplicateOf": self.duplicate_of}


@dataclass
class VideoPlan:
    name: str
    crf: int
    shots: list[Shot]

    @property
    def frames(self) -> int:
        return sum(shot.frames for shot in self.shots)

    @property
    def cuts(self) -> list[int]:
        return [shot.start for shot in self.shots[1:]]


# ---------------------------------------------------------------- planning

def colour(rng: random.Random, low: int = 40, high: int = 255) -> str:
    return "0x" + "".join(f"{rng.randint(low, high):02x}" for _ in range(3))


def content(rng: random.Random, source: str, frames: int, name: str, still: bool = False) -> dict:
    """The parameters that draw a shot of `source` over `frames` frames (still: one held frame)."""
    params: dict[str, Any] = {"seed": rng.randrange(2**31), "span": frames}
    if source == "mandelbrot":
        x, y = rng.choice(MANDELBROT_POINTS)
        params.update(x=x, y=y, startScale=round(rng.uniform(0.6, 3.0), 3), endPts=round(rng.uniform(*MANDELBROT_END_PTS), 1))
    elif source == "life":
        params.update(ratio=round(rng.uniform(0.2, 0.5), 2), alive=colour(rng, 160), dead=colour(rng, 40, 140),
                      mold=colour(rng, 60, 200))
    elif source == "cellauto":
        params.update(rule=rng.choice((18, 30, 45, 73, 90, 105, 110, 150)), tint=[round(rng.uniform(0.75, 1.0), 2) for _ in range(3)],
                      floor=[round(rng.uniform(0.1, 0.5), 2) for _ in range(3)])
    elif source == "gradients":
        params.update(colours=[colour(rng) for _ in range(4)], speed=round(rng.uniform(0.01, 0.05), 3))
    elif source == "sierpinski":
        params.update(type=rng.randint(0, 1), jump=rng.randint(1, 8), floor=[round(rng.uniform(0.1, 0.5), 2) for _ in range(3)])
    elif source == "noise":
        params.update(base=colour(rng, 60, 220), strength=rng.randint(20, 35))
    if source in PATTERN_SOURCES:
        # A fixed test pattern looks the same in every shot: each shot views its own region of it,
        # maybe mirrored, so two good shots of one pattern are not near-duplicates of each other.
        params["view"] = {"size": round(rng.uniform(0.45, 0.75), 3), "x": round(rng.random(), 3), "y": round(rng.random(), 3),
                          "flip": rng.choice(("", "hflip", "vflip"))}
    if still:
        params.update(motion="none", holdFrame=rng.randint(0, 50))
    else:
        motions = ("pan", "zoom") if source in STILL_SOURCES else ("pan", "zoom", "none", "none")
        params["motion"] = rng.choice(motions)
        if params["motion"] == "pan":
            params.update(panFrom=[rng.randint(0, 1), rng.randint(0, 1)], panTo=[rng.randint(0, 1), rng.randint(0, 1)])
            # A pan always crosses sideways: straight up or down over the vertical bars of `bars`
            # changed next to nothing (motion 0.002), a good shot that was in truth static.
            if params["panFrom"][0] == params["panTo"][0]:
                params["panTo"] = [1 - params["panFrom"][0], params["panTo"][1]]
        elif params["motion"] == "zoom":
            params.update(zoomFrom=1.0, zoomTo=round(rng.uniform(1.15, 1.4), 2))
            if rng.random() < 0.5:
                params["zoomFrom"], params["zoomTo"] = params["zoomTo"], params["zoomFrom"]
        if rng.random() < 0.3:
            params["dim"] = round(rng.uniform(0.15, 0.35), 2)
    if rng.random() < 0.6:
        params.update(text=f"{rng.choice(WORDS).upper()} {rng.randint(1, 99)}", textSize=rng.randint(24, 56),
                      textY=rng.randint(10, HEIGHT - 70), textSpeed=0 if still else rng.randint(2, 8))
    return params


def drop_kinds(spec: GenerateSpec, index: int) -> list[str]:
    """The shots of video `index` made to be dropped: one short, then DROP_KINDS in turn across
    the set (so two videos hold every kind); the first video has nothing earlier to duplicate."""
    if spec.drop_shots == 0:
        return []
    others = spec.drop_shots - 1
    kinds = [DROP_KINDS[(index * others + k) % len(DROP_KINDS)] for k in range(others)]
    if index == 0:
        kinds = [k if k != "duplicate" else "washed-out" for k in kinds]
    return ["short", *kinds]


def order_ok(shots: list[Shot]) -> bool:
    return all(not (a.kind == "dark" and b.kind == "dark") for a, b in zip(shots, shots[1:]))


def plan_video(spec: GenerateSpec, index: int, earlier: list[VideoPlan]) -> VideoPlan:
    rng = random.Random(f"video-cut-generate:{spec.seed}:{index}")
    name = f"gen{spec.seed}-{index:03d}"

    def seconds(low_high: tuple[float, float]) -> int:
        return int(round(rng.uniform(*low_high) * FPS))

    shots = [Shot(kind, rng.randint(*SHORT_FRAMES) if kind == "short" else seconds(DROP_SECONDS))
             for kind in drop_kinds(spec, index)]
    if spec.long_shot_every and index % spec.long_shot_every == 0:
        shots.append(Shot("good", seconds(LONG_SHOT_SECONDS)))
    target = seconds(spec.video_seconds)
    low = int(round(spec.shot_seconds[0] * FPS))
    # At least one good shot short enough for a later video to repeat whole as its duplicate.
    while target - sum(s.frames for s in shots) >= low or not any(s.kind == "good" and s.frames <= DUPLICATE_MAX_FRAMES for s in shots):
        shots.append(Shot("good", max(low, min(seconds(spec.shot_seconds), target - sum(s.frames for s in shots)))))
    for _ in range(1000):
        rng.shuffle(shots)
        if order_ok(shots):
            break
    # Duplicates first (their source is fixed), then every other shot's source differs from both neighbours.
    originals = [(video, shot) for video in earlier for shot in video.shots
                 if shot.kind == "good" and shot.frames <= DUPLICATE_MAX_FRAMES]
    for shot in shots:
        if shot.kind == "duplicate" and not originals:
            shot.kind = "static"  # nothing earlier is short enough to repeat whole
        elif shot.kind == "duplicate":
            video, original = rng.choice(originals)
            shot.source = original.source
            # The whole shot again (re-encoded, cropped, brighter): a re-upload of the same clip.
            shot.frames = original.frames
            shot.params = {**original.params, "duplicate": True}
            shot.duplicate_of = {"video": video.name, "startFrame": original.start}
    for position, shot in enumerate(shots):
        if shot.kind == "duplicate":
            continue
        taken = {s.source for s in shots[max(0, position - 1):position + 2] if s is not shot and s.source}
        if shot.kind in ("dark", "washed-out") and rng.random() < 0.5 and "color" not in taken:
            shot.source = "color"
            shot.params = {"variant": "black" if shot.kind == "dark" else "white", "seed": rng.randrange(2**31)}
            continue
        pool = STATIC_SOURCES if shot.kind == "static" else GOOD_SOURCES
        shot.source = rng.choice([s for s in pool if s not in taken])
        shot.params = content(rng, shot.source, shot.frames, name, still=shot.kind == "static")
        if shot.kind in ("dark", "washed-out"):
            shot.params["variant"] = "crushed" if shot.kind == "dark" else "lifted"
    start = 0
    for shot in shots:
        shot.start = start
        start += shot.frames
    return VideoPlan(name=name, crf=rng.randint(*spec.crf), shots=shots)


def plan_set(spec: GenerateSpec) -> list[VideoPlan]:
    plans: list[VideoPlan] = []
    for index in range(spec.videos):
        plans.append(plan_video(spec, index, plans))
    return plans


# ---------------------------------------------------------------- drawing

def tint(p: dict) -> str:
    """Colours a black-and-white pattern: black lifted to a colour, white tinted."""
    (fr, fg, fb), (tr, tg, tb) = p["floor"], p.get("tint", (1.0, 1.0, 1.0))
    return f"format=rgb24,colorlevels=romin={fr}:gomin={fg}:bomin={fb}:romax={tr}:gomax={tg}:bomax={tb}"


def source_filter(source: str, p: dict, width: int, height: int) -> str:
    """An ffmpeg source drawing `source` at width x height, 25 fps (endless; the caller trims)."""
    size = f"{width}x{height}"
    half = f"{width // 2}x{height // 2}"
    quarter = f"{width // 4}x{height // 4}"
    if source == "testsrc2":
        return f"testsrc2=s={size}:r={FPS}"
    if source == "bars":
        return f"smptehdbars=s={size}:r={FPS}"
    if source == "mandelbrot":
        return (f"mandelbrot=s={half}:r={FPS}:maxiter=128:start_x={p['x']}:start_y={p['y']}:start_scale={p['startScale']}"
                f":end_scale=0.0005:end_pts={p['endPts']},scale={size}")
    if source == "life":
        return (f"life=s={quarter}:r={FPS}:seed={p['seed']}:ratio={p['ratio']}:life_color={p['alive']}"
                f":death_color={p['dead']}:mold=8:mold_color={p['mold']},scale={size}:flags=neighbor")
    if source == "cellauto":
        return (f"cellauto=s={quarter}:r={FPS}:rule={p['rule']}:seed={p['seed']}:ratio=0.5:scroll=1,"
                f"scale={size}:flags=neighbor,{tint(p)}")
    if source == "gradients":
        c = p["colours"]
        return (f"gradients=s={half}:r={FPS}:seed={p['seed']}:n=4:speed={p['speed']}:c0={c[0]}:c1={c[1]}:c2={c[2]}"
                f":c3={c[3]},scale={size}")
    if source == "sierpinski":
        return f"sierpinski=s={half}:r={FPS}:seed={p['seed']}:type={p['type']}:jump={p['jump']},scale={size},{tint(p)}"
    if source == "noise":
        return (f"color=c={p['base']}:s={width // 8}x{height // 8}:r={FPS},noise=alls={p['strength']}:allf=t+u"
                f":all_seed={p['seed'] % 65536},scale={size}:flags=bicubic")
    if source == "color":
        shade, grain = ("0x0a0a0e", 6) if p["variant"] == "black" else ("0xf0f0ea", 4)
        return f"color=c={shade}:s={size}:r={FPS},noise=alls={grain}:allf=t:all_seed={p['seed'] % 65536}"
    raise ValueError(f"unknown source {source!r}")


def shot_filter(shot: Shot, frames: int, fade_in: bool, fade_out: bool) -> str:
    """The filter chain (no labels) drawing one shot: exactly `frames` frames at 640x360."""
    p = shot.params
    motion = p.get("motion", "none")
    if motion == "pan":
        chain = [source_filter(shot.source, p, PAN_W, PAN_H)]
    else:
        chain = [source_filter(shot.source, p, WIDTH, HEIGHT)]
    if "holdFrame" in p:
        k = p["holdFrame"]
        chain.append(f"trim=start_frame={k}:end_frame={k + 1},loop=loop={frames - 1}:size=1:start=0")
    view = p.get("view")
    if view:
        size = view["size"]
        chain.append(f"crop=iw*{size}:ih*{size}:(iw-iw*{size})*{view['x']}:(ih-ih*{size})*{view['y']},"
                     f"scale={PAN_W if motion == 'pan' else WIDTH}:{PAN_H if motion == 'pan' else HEIGHT}")
        if view["flip"]:
            chain.append(view["flip"])
    chain.append(f"trim=end_frame={frames}")
    span_frames = max(1, p.get("span", frames) - 1)
    if motion == "pan":
        (x0, y0), (x1, y1) = p["panFrom"], p["panTo"]
        dx, dy = PAN_W - WIDTH, PAN_H - HEIGHT
        chain.append(f"crop={WIDTH}:{HEIGHT}:x='{dx}*({x0}+({x1 - x0})*n/{span_frames})'"
                     f":y='{dy}*({y0}+({y1 - y0})*n/{span_frames})'")
    elif motion == "zoom":
        z0, z1 = p["zoomFrom"], p["zoomTo"]
        chain.append(f"zoompan=z='{z0}+({z1 - z0})*on/{span_frames}':x='iw/2-iw/zoom/2':y='ih/2-ih/zoom/2'"
                     f":d=1:s={WIDTH}x{HEIGHT}:fps={FPS}")
    if p.get("text"):
        x = f"'mod({p['textSpeed']}*n+{p['seed'] % 200},w+tw)-tw'" if p["textSpeed"] else "40"
        chain.append(f"drawtext=fontfile={FONT}:text='{p['text']}':fontsize={p['textSize']}:fontcolor=white"
                     f":borderw=2:bordercolor=black:x={x}:y={p['textY']}")
    if p.get("dim"):
        chain.append(f"eq=brightness='-{p['dim']}*max(0,1-n/{FPS})':eval=frame")
    if p.get("variant") == "crushed":
        chain.append("colorlevels=romax=0.07:gomax=0.07:bomax=0.07")
    elif p.get("variant") == "lifted":
        chain.append("colorlevels=romin=0.86:gomin=0.86:bomin=0.86")
    if p.get("duplicate"):
        # Brighter, and re-encoded at this video's own quality: the same clip, other bytes. (A crop
        # would move a fine texture's pixels far enough to change its perceptual hash.)
        chain.append("eq=brightness=0.04")
    if fade_in:
        chain.append(f"fade=t=in:start_frame=0:nb_frames={VIDEO_FADE_FRAMES}")
    if fade_out:
        chain.append(f"fade=t=out:start_frame={frames - VIDEO_FADE_FRAMES}:nb_frames={VIDEO_FADE_FRAMES}")
    chain.append(f"setpts=N/({FPS}*TB),format=yuv420p,setsar=1")
    return ",".join(chain)


def render(plan: VideoPlan, path: str) -> None:
    """Draws and encodes one planned video (x264 superfast, one thread)."""
    last = len(plan.shots) - 1
    chains = [f"{shot_filter(shot, shot.frames, i == 0, i == last)}[s{i}]" for i, shot in enumerate(plan.shots)]
    inputs = "".join(f"[s{i}]" for i in range(len(plan.shots)))
    graph = ";".join(chains) + f";{inputs}concat=n={len(plan.shots)}:v=1:a=0[v]"
    ffmpeg(["-filter_complex_threads", "1", "-filter_complex", graph, "-map", "[v]", "-an", "-c:v", "libx264",
            "-preset", "superfast", "-crf", str(plan.crf), "-pix_fmt", "yuv420p", "-threads", "1",
            "-movflags", "+faststart", path], f"generate {plan.name}")


def generate_set(spec: GenerateSpec, directory: str, progress: Callable[..., None] = lambda **_: None) -> list[dict]:
    """Renders every planned video into directory; returns the truth's video records (no uri)."""
    if not os.path.exists(FONT):
        raise FileNotFoundError(f"generate: the font {FONT} is missing (Debian package fonts-dejavu-core)")
    records = []
    for plan in plan_set(spec):
        path = os.path.join(directory, f"{plan.name}.mp4")
        started = time.perf_counter()
        render(plan, path)
        with open(path, "rb") as source:
            sha256 = hashlib.sha256(source.read()).hexdigest()
        records.append({"name": plan.name, "path": path, "sha256": sha256, "frames": plan.frames,
                        "seconds": plan.frames / FPS, "crf": plan.crf, "cuts": plan.cuts,
                        "shots": [shot.truth() for shot in plan.shots],
                        "sources": sorted({s.source for s in plan.shots}),
                        "renderSeconds": round(time.perf_counter() - started, 3)})
        progress(stage="generate", video=plan.name, done=len(records), of=spec.videos)
    return records


# ---------------------------------------------------------------- bad inputs

def make_bad_inputs(directory: str) -> dict[str, str]:
    """Files a source list may name that are not usable videos: name -> path.

    - not-a-video: a text file named .mp4;
    - truncated: the first 40% of a real MP4 (its index, written first, promises 100 frames);
    - corrupt: a real MP4, index intact, with its middle fifth overwritten by random bytes;
    - audio-only: an AAC tone in an MP4, no video stream;
    - empty: a 0-byte .mp4.
    """
    os.makedirs(directory, exist_ok=True)
    paths = {name: os.path.join(directory, f"{name}.mp4")
             for name in ("not-a-video", "truncated", "corrupt", "audio-only", "empty")}
    with open(paths["not-a-video"], "w") as out:
        out.write("This is a text file, not a video.\n" * 20)
    open(paths["empty"], "wb").close()
    ffmpeg(["-f", "lavfi", "-i", "sine=frequency=440:duration=2", "-c:a", "aac", "-b:a", "64k", paths["audio-only"]],
           "make_bad_inputs audio-only")
    with tempfile.TemporaryDirectory() as scratch:
        whole = os.path.join(scratch, "whole.mp4")
        ffmpeg(["-f", "lavfi", "-i", f"testsrc2=s={WIDTH}x{HEIGHT}:r={FPS}:d=4", "-c:v", "libx264", "-preset", "superfast",
                "-pix_fmt", "yuv420p", "-threads", "1", "-movflags", "+faststart", whole], "make_bad_inputs whole")
        with open(whole, "rb") as source:
            data = source.read()
    with open(paths["truncated"], "wb") as out:
        out.write(data[: len(data) * 2 // 5])
    damaged = bytearray(data)
    low, high = len(data) * 2 // 5, len(data) * 3 // 5
    damaged[low:high] = random.Random(0).randbytes(high - low)
    with open(paths["corrupt"], "wb") as out:
        out.write(bytes(damaged))
    return paths


def probe_frames(path: str) -> int:
    """Frames a file really holds (ffprobe counts them by decoding), for tests."""
    run = subprocess.run(["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries",
                          "stream=nb_read_frames", "-of", "default=nw=1:nk=1", path], capture_output=True, text=True, check=True)
    return int(run.stdout.strip())
