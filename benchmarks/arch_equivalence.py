"""Evidence that a refactor of the analyser changes no figure: dump every output to a folder.

Writes, for the six walkthrough profiles and a handful of other configurations, the CLI's
``summary`` (text and JSON), ``insights --json``, the JSON report, ``compare`` (text and JSON) and
an offscreen PNG of every GUI report (single profiles and compared pairs) into ``OUT``. Run it
before and after a change and compare the two folders::

    python benchmarks/arch_equivalence.py --profiles /tmp/eq-profiles OUT_BEFORE
    ... change ...
    python benchmarks/arch_equivalence.py --profiles /tmp/eq-profiles OUT_AFTER
    python benchmarks/arch_equivalence.py --diff OUT_BEFORE OUT_AFTER

``--profiles`` is a cache of the simulated profiles (written on first use: ``analyse demo`` for
the walkthrough, ``analyse profile`` for the others), so both runs read the very same files.
``--diff`` lists which files are byte-identical and, for PNGs that differ in bytes, whether their
pixels are identical.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import re
import subprocess
import sys
import time
from pathlib import Path

#: name -> ``analyse profile`` flags (besides the walkthrough's six profiles)
CONFIGS: dict[str, list[str]] = {
    "mlp-inference": ["--model", "mlp", "--mode", "inference", "--micro-batch-size", "16"],
    "resnet50-mb8": ["--model", "resnet50", "--micro-batch-size", "8"],
    "bert-large-4x4": [
        "--model",
        "bert-large",
        "--num-ipus",
        "4",
        "--replication-factor",
        "4",
        "--strategy",
        "pipelined",
        "--gradient-accumulation",
        "16",
        "--split-points",
        "encoder.layer.5,encoder.layer.11,encoder.layer.17",
    ],
}
#: compared pairs (A, B) by profile stem
PAIRS = (("1-base", "2-half"), ("3-accumulate", "4-device-iterations"), ("5-8bit-io", "6-async"))
WALKTHROUGH = ("1-base", "2-half", "3-accumulate", "4-device-iterations", "5-8bit-io", "6-async")


def _analyse(*args: str) -> list[str]:
    return [str(Path(sys.executable).with_name("analyse")), *args]


def make_profiles(folder: Path) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "6-async.h5").exists():
        subprocess.run(_analyse("demo", "-o", str(folder), "--no-report"), check=True)
    paths = {stem: folder / f"{stem}.h5" for stem in WALKTHROUGH}
    for name, flags in CONFIGS.items():
        path = folder / f"{name}.h5"
        if not path.exists():
            subprocess.run(_analyse("profile", "-o", str(path), "--quiet", *flags), check=True)
        paths[name] = path
    synthetic = folder / "synthetic.h5"
    if not synthetic.exists():
        from profiles import write_profile
        from profiles.synthetic import make_synthetic_profile

        write_profile(synthetic, make_synthetic_profile(n_steps=4000, tiles=64, seed=3))
    paths["synthetic"] = synthetic
    return paths


def dump_cli(paths: dict[str, Path], out: Path) -> None:
    def run(name: str, *args: str) -> None:
        proc = subprocess.run(_analyse(*args), capture_output=True, text=True)
        (out / name).write_text(f"exit {proc.returncode}\n{proc.stdout}{proc.stderr}")

    for stem, path in paths.items():
        run(f"{stem}.summary.txt", "summary", str(path))
        run(f"{stem}.summary.json", "summary", "--json", str(path))
        run(f"{stem}.insights.json", "insights", "--json", str(path))
        report = out / f"{stem}.report.json"
        run(f"{stem}.report.log", "report", str(path), "-o", str(report), "--force")
    for a, b in PAIRS:
        run(f"compare.{a}.{b}.txt", "compare", str(paths[a]), str(paths[b]))
        run(f"compare.{a}.{b}.json", "compare", "--json", str(paths[a]), str(paths[b]))
    normalise(out)


#: A progress line of a command whose output is not a terminal ("[   5.0 s] re-simulating ...
#: 2/5"): its times differ between any two runs, and it is absent when the simulation cache
#: already holds the answers.
_PROGRESS = re.compile(r"^\[\s*\d+(\.\d+)? s\] .*\n", re.MULTILINE)


def normalise(out: Path) -> None:
    """Drop what differs between any two runs: the reports' time of writing, the output
    folder's name in the CLI's messages and the progress lines."""
    import json

    for path in [*out.glob("*.txt"), *out.glob("*.json"), *out.glob("*.log")]:
        text = path.read_text()
        if _PROGRESS.search(text):
            path.write_text(_PROGRESS.sub("", text))

    for path in out.glob("*.report.json"):
        report = json.loads(path.read_text())
        report.pop("generated", None)
        path.write_text(json.dumps(report, indent=1, sort_keys=True))
    for path in out.glob("*.log"):
        path.write_text(path.read_text().replace(str(out), "OUT"))


def dump_gui(paths: dict[str, Path], out: Path) -> None:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QCoreApplication, QThreadPool
    from PySide6.QtWidgets import QApplication

    from analyser.gui.model.document import Document
    from analyser.gui.reports import report_classes
    from analyser.gui.theme import apply_theme

    app = QApplication.instance() or QApplication([])
    apply_theme("light")
    cases = [(stem, (stem,)) for stem in paths] + [(f"{a}-vs-{b}", (a, b)) for a, b in PAIRS]
    for case, stems in cases:
        docs = [Document.open(paths[s]) for s in stems]
        for cls in report_classes():
            report = cls()
            report.resize(1400, 900)
            report.set_document(docs[0], docs[1] if len(docs) > 1 else None)
            report.show()
            # settle: background work (the trace's range summary starts after a short timer)
            for _ in range(3):
                for _ in range(20):
                    QCoreApplication.processEvents()
                QThreadPool.globalInstance().waitForDone(60_000)
                time.sleep(0.3)
            for _ in range(20):
                QCoreApplication.processEvents()
            report.grab().save(str(out / f"gui.{case}.{cls.key}.png"))
            report.shutdown()
            report.close()
            report.deleteLater()
            QCoreApplication.processEvents()
        for doc in docs:
            doc.close()
    del app


def diff(before: Path, after: Path) -> int:
    from PySide6.QtGui import QImage

    names = sorted({p.name for p in before.iterdir()} | {p.name for p in after.iterdir()})
    same, pixel_same, differ, missing = [], [], [], []
    for name in names:
        a, b = before / name, after / name
        if not a.exists() or not b.exists():
            missing.append(name)
        elif filecmp.cmp(a, b, shallow=False):
            same.append(name)
        elif name.endswith(".png") and QImage(str(a)) == QImage(str(b)):
            pixel_same.append(name)
        else:
            differ.append(name)
    print(f"{len(same)} byte-identical, {len(pixel_same)} pixel-identical PNGs, "
          f"{len(differ)} differ, {len(missing)} in one folder only")  # fmt: skip
    for name in differ:
        print("differs:", name)
    for name in missing:
        print("only in one:", name)
    return 1 if differ or missing else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, nargs="+", help="output folder (two with --diff)")
    parser.add_argument("--profiles", type=Path, default=Path("/tmp/arch-eq-profiles"))
    parser.add_argument("--diff", action="store_true", help="compare two output folders")
    parser.add_argument("--no-gui", action="store_true")
    parser.add_argument("--gui-only", action="store_true")
    parser.add_argument("--normalise", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.diff:
        return diff(*args.out[:2])
    if args.normalise:  # a folder written before normalise() existed
        normalise(args.out[0])
        return 0
    out = args.out[0]
    out.mkdir(parents=True, exist_ok=True)
    paths = make_profiles(args.profiles)
    if not args.gui_only:
        dump_cli(paths, out)
    if not args.no_gui:
        dump_gui(paths, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
