#!/usr/bin/python3
"""tools/bench/wheel-build.py - how long the wheel's native build takes and
how much strip --strip-debug saves: the figures of docs/python.md's
"What pip runs".

    tools/bench/wheel-build.py [RUNS]     (default 1)

Runs the build backend's own steps (python/build_backend/ringfeed_build.py:
configure, make of the library and the helper, strip of copies of the
two) in a temporary folder, as `pip wheel .` does, RUNS times, and
prints each step's seconds (the median when RUNS > 1) and the sizes of
the library and the helper before and after the strip. The source tree
is only read (it needs a configure script: run autoreconf -fi in a git
checkout first, as the backend would). CC, CFLAGS and the rest reach
configure as they reach it under pip. Standard library only.
"""

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent
                       / "python" / "build_backend"))
import ringfeed_build  # noqa: E402  (the backend, from the source tree)

steps = {}
_run = ringfeed_build.run


def timed_run(cmd, cwd, what):
    """The backend's run(), timed per step (configure, make, strip)."""
    start = time.monotonic()
    result = _run(cmd, cwd, what)
    steps.setdefault(what, []).append(time.monotonic() - start)
    return result


ringfeed_build.run = timed_run


def kb(path):
    return path.stat().st_size / 1024


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    sizes = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="ringfeed-build-") as tmp:
            build = Path(tmp)
            before = len(steps.get("strip", []))
            shipped = ringfeed_build.build_native(build, None)
            # strip runs twice per build (library, helper): one entry
            strips = steps["strip"][before:]
            del steps["strip"][before:]
            steps["strip"].append(sum(strips))
            for name, path in shipped.items():
                # the unstripped original: the same name, in .libs/ or
                # tools/ of the build folder
                original = next(p for p in
                                (build / ".libs" / path.name,
                                 build / "tools" / path.name,
                                 build / "tools" / ".libs" / path.name)
                                if p.is_file() and p != path)
                sizes.append((name, kb(original), kb(path)))
    print()
    print(f"{runs} build(s), {ringfeed_build._jobs()} make jobs "
          f"(CPUs this process may use)")
    for what, secs in steps.items():
        print(f"  {what:10s} {statistics.median(secs):6.1f} s"
              + (f"  (runs: {', '.join(f'{s:.1f}' for s in secs)})"
                 if runs > 1 else ""))
    for name in dict.fromkeys(n for n, _, _ in sizes):
        before = statistics.median(b for n, b, _ in sizes if n == name)
        after = statistics.median(a for n, _, a in sizes if n == name)
        print(f"  {name:20s} {before:7.0f} KB built, {after:6.0f} KB "
              f"after strip --strip-debug ({after / before:.0%})")


if __name__ == "__main__":
    main()
