"""Measures the cut stage on a generated set (not a test: run by hand, prints JSON).

    PYTHONPATH=../common OMP_NUM_THREADS=1 python3 measure.py [videos] [seed] [settings as JSON]

Generates the set (timing each video), fetches and cuts every video over an in-memory S3, and
reports cut precision and recall within 2 frames against truth.json, and the speed of detection
and encoding in video seconds per wall second and per CPU second (ffmpeg runs with one thread).
"""
from __future__ import annotations

import contextlib
import io
import json
import sys
import time

from cuts import match_cuts
from jobio import JobContext
from main import main
from memory_s3 import MemoryS3


def read(s3: MemoryS3, uri: str) -> bytes:
    bucket, key = uri[len("s3://"):].split("/", 1)
    return s3.objects[(bucket, key)]


def measure(videos: int, seed: int, settings: dict | None = None) -> dict:
    s3 = MemoryS3()

    def stage(name: str, spec: dict) -> dict:
        with contextlib.redirect_stdout(io.StringIO()):
            return main(spec, JobContext(output_uri=f"s3://lab/{name}/", client=s3))

    started = time.perf_counter()
    generated = stage("generate", {"stage": "generate", "videos": videos, "seed": seed})
    generate_seconds = time.perf_counter() - started
    truth = json.loads(read(s3, generated["truthUri"]))
    tp = fp = fn = 0
    totals = {"videoSeconds": 0.0, "detectSeconds": 0.0, "encodeSeconds": 0.0, "detectCpuSeconds": 0.0, "encodeCpuSeconds": 0.0}
    misses = []
    for video in truth["videos"]:
        fetched = stage(f"fetch/{video['name']}", {"stage": "fetch", "source": {"id": video["name"], "uri": video["uri"]},
                                                   "maxBytes": 1 << 30, "maxSeconds": 3600})
        result = stage(f"cut/{video['name']}", {"stage": "cut", "videoUri": fetched["videoUri"], "sha256": fetched["sha256"],
                                                "sourceId": video["name"], "settings": settings or {}})
        document = json.loads(read(s3, result["clipsUri"]))
        found = [c["frame"] for c in document["cuts"]]
        hits, false, missed = match_cuts(found, video["cuts"])
        tp, fp, fn = tp + hits, fp + false, fn + missed
        if false or missed:
            misses.append({"video": video["name"], "found": found, "truth": video["cuts"]})
        for name in totals:
            totals[name] += document["timings"][name]
    seconds = totals["videoSeconds"]
    return {
        "videos": videos, "seed": seed, "cuts": tp + fn, "precision": round(tp / max(1, tp + fp), 4),
        "recall": round(tp / max(1, tp + fn), 4), "misses": misses, "videoSeconds": round(seconds, 2),
        "generateSecondsPerVideo": round(generate_seconds / videos, 3),
        "generateSecondsPer20sVideo": round(generate_seconds / seconds * 20, 3),
        "detectSpeed": round(seconds / totals["detectSeconds"], 1), "detectSpeedCpu": round(seconds / totals["detectCpuSeconds"], 1),
        "encodeSpeed": round(seconds / totals["encodeSeconds"], 1), "encodeSpeedCpu": round(seconds / totals["encodeCpuSeconds"], 1),
        "cutSpeed": round(seconds / (totals["detectSeconds"] + totals["encodeSeconds"]), 1),
        "cutSpeedCpu": round(seconds / (totals["detectCpuSeconds"] + totals["encodeCpuSeconds"]), 1),
    }


if __name__ == "__main__":
    arguments = sys.argv[1:]
    print(json.dumps(measure(int(arguments[0]) if arguments else 12, int(arguments[1]) if len(arguments) > 1 else 11,
                             json.loads(arguments[2]) if len(arguments) > 2 else None), indent=2))
