"""Measuring and summing up for tools/bench/bench-python.sh (and the
memory sampler of tools/bench/bench-pipeline.sh). Standard
library only, so that any Python 3 runs it.

    python3 tools/bench/bench_measure.py run OUT -- COMMAND [ARG]...
    python3 tools/bench/bench_measure.py report DIR --runs R [--kind K]...
    python3 tools/bench/bench_measure.py sample ROOT STOP OUT

run      runs COMMAND with its stdout in OUT.out and its stderr in OUT.err,
         and writes OUT.json: the JSON object on the last line of its
         stdout, plus what was measured from outside:
           exit_status     COMMAND's (-N: killed by signal N);
           command_wall_s  its wall time;
           command_cpu_s   user+sys of COMMAND and of every descendant it
                           reaped, from wait4() (as /usr/bin/time counts);
                           for Python this includes the interpreter's start
                           and the imports;
           peak_pss_mb     the peak over the run of the sum of Pss over
                           COMMAND and its descendants, from
                           /proc/PID/smaps_rollup. Pss splits a page among
                           the processes that map it, so ringfeed's shared
                           ring and torch's shared-memory batches count
                           once, and DALI's threads, in one process, once;
           peak_rss_mb     the same of Rss (shared pages counted once per
                           process that maps them), for reference;
           sampler_cpu_s   this sampler's own CPU, in no figure above.
         Exits with COMMAND's status (1 when it died of a signal).

sample   samples the descendants of process ROOT (not ROOT itself: for
         tools/bench/bench-pipeline.sh it is /usr/bin/time) until the file
         STOP appears, then writes "PEAK_PSS_KB SAMPLER_CPU_S" to OUT.

report   reads DIR/KIND/NAME.RUN.json for the five contenders of
         bench-python.sh and RUN = 1..R, and prints, for each KIND, a table
         of medians and the ratios a/b, a/c, a/d and a/e against their
         targets, then one JSON object as the last line. A contender that
         could not run has DIR/unavailable/NAME, one line saying why.

How the sampler reads memory: every 50 ms it sums Rss from
/proc/PID/statm over the tree, which costs next to nothing; it reads Pss
(smaps_rollup walks every resident page, ~10 ms of kernel time for a torch
tree) when that sum reaches a new high by 2%, and every 2 s otherwise, as
tools/bench/bench-pipeline.sh does. The tree comes from the parent pid in
/proc/PID/stat; threads are not listed apart, so none counts twice.
"""

import json
import os
import subprocess
import sys
import time

PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


# ---- run: one command, measured --------------------------------------------


def ppid_of(pid):
    """Parent pid; the name in parentheses may hold spaces or ")"."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * PAGE_KB
    except (OSError, IndexError, ValueError):
        return 0


def pss_kb(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


class Tree:
    """The processes under a root pid, found from their parents' pids."""

    def __init__(self, root):
        self.root = root
        self.parent = {}  # pid -> ppid, read once per pid listed

    def pids(self):
        listed = {int(n) for n in os.listdir("/proc") if n.isdigit()}
        for pid in list(self.parent):
            if pid not in listed:
                del self.parent[pid]
        for pid in listed:
            if pid not in self.parent:
                self.parent[pid] = ppid_of(pid)
        children = {}
        for pid, pp in self.parent.items():
            children.setdefault(pp, []).append(pid)
        found, todo = [self.root], list(children.get(self.root, ()))
        while todo:
            pid = todo.pop()
            found.append(pid)
            todo.extend(children.get(pid, ()))
        return found


class Peaks:
    """The peaks of the Rss and Pss sums over a tree, in kB, sampled as
    the top of this file says; the root itself counted or not."""

    def __init__(self, root, count_root=True):
        self.tree = Tree(root)
        self.count_root = count_root
        self.pss_kb = self.rss_kb = self.samples = 0

    def sample(self):
        pids = self.tree.pids()
        if not self.count_root:
            pids = pids[1:]
        rss = sum(rss_kb(p) for p in pids)
        if rss > self.rss_kb * 1.02 or self.samples % 40 == 0:
            self.pss_kb = max(self.pss_kb, sum(pss_kb(p) for p in pids))
        self.rss_kb = max(self.rss_kb, rss)
        self.samples += 1


def sample(root, stop, out):
    """Samples root's descendants every 50 ms until the file stop appears;
    writes "PEAK_PSS_KB CPU_S" to out, CPU_S being the sampler's own."""
    peaks = Peaks(root, count_root=False)
    while not os.path.exists(stop):
        peaks.sample()
        time.sleep(0.05)
    mine = os.times()
    with open(out, "w", encoding="utf-8") as f:
        f.write("%d %.3f\n" % (peaks.pss_kb, mine.user + mine.system))
    return 0


def last_json(path):
    """The JSON object on the last non-empty line of path, or {}."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [line for line in f.read().splitlines() if line.strip()]
        value = json.loads(lines[-1]) if lines else {}
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def run(out, command):
    """Runs command, sampling its tree; writes out.json. Its status."""
    t0 = time.perf_counter()
    with open(out + ".out", "wb") as so, open(out + ".err", "wb") as se:
        child = subprocess.Popen(command, stdout=so, stderr=se)
    peaks = Peaks(child.pid)
    while True:
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid == child.pid:
            break
        peaks.sample()
        time.sleep(0.05)
    wall = time.perf_counter() - t0
    child.returncode = 0  # reaped above; keeps Popen from waiting again
    code = os.waitstatus_to_exitcode(status)
    record = last_json(out + ".out")
    mine = os.times()
    record.update({
        "exit_status": code,
        "command_wall_s": round(wall, 3),
        "command_cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
        "peak_pss_mb": round(peaks.pss_kb / 1024, 1),
        "peak_rss_mb": round(peaks.rss_kb / 1024, 1),
        "sampler_cpu_s": round(mine.user + mine.system, 3),
        "command": command,
    })
    with open(out + ".json", "w", encoding="utf-8") as f:
        json.dump(record, f)
        f.write("\n")
    return code if code >= 0 else 1


def epoch_figures(e):
    """The timing fields both loop benchmarks (bench_loaders.py,
    bench_torch.py) report, from their measured epoch e: images, run,
    startup, first, total and cpu, in seconds."""
    images = e["images"]
    return {
        "images": images,
        "seconds": e["run"],
        "images_per_s": images / e["run"] if e["run"] > 0 else 0.0,
        "startup_s": e["startup"],
        "first_batch_s": e["first"],
        "images_per_s_with_startup":
            images / e["total"] if e["total"] > 0 else 0.0,
        "cpu_s": e["cpu"],
    }


# ---- report: the medians and the ratios ------------------------------------

# The contenders, in bench-python.sh's order, with their table names.
CONTENDERS = [
    ("a", "ringfeed", "(a) ringfeed.Loader, Python"),
    ("b", "ringfeed-bench", "(b) ringfeed-bench, C"),
    ("c", "torch-io", "(c) torch DataLoader + decode_jpeg"),
    ("d", "torch-pil", "(d) torch DataLoader + PIL"),
    ("e", "dali", "(e) DALI CPU pipeline"),
]
# Ratios of (a)'s images/s over another's, and the issue's targets.
RATIOS = [("a/b", "b", 0.95), ("a/c", "c", 2.5), ("a/d", "d", None),
          ("a/e", "e", 2.5)]


def median(values):
    """The middle value (the lower middle one of an even count), or None."""
    values = sorted(v for v in values if v is not None)
    return values[(len(values) - 1) // 2] if values else None


def figures(r):
    """The figures of one run's record, the same names for every loader:
    images, images/s, with start-up, start-up s, CPU s per 1,000 images
    (the loader's own span where it has one; else the whole command's),
    and peak PSS. None for a run that failed."""
    if r.get("exit_status") != 0:
        return None
    if "samples" in r:  # ringfeed-bench's JSON
        images = r["samples"]
        rate, startup, secs = r["samples_per_s"], r["startup_s"], r["seconds"]
        with_start = images / (secs + startup) if secs + startup > 0 else 0
        cpu, own = r["command_cpu_s"], None
    else:
        images = r["images"]
        rate, startup = r["images_per_s"], r["startup_s"]
        with_start = r["images_per_s_with_startup"]
        cpu, own = r["cpu_s"], r.get("cpu_own_s")
    return {k: rounded(v) for k, v in {
        "images": images,
        "images_per_s": rate,
        "images_per_s_with_startup": with_start,
        "startup_s": startup,
        "cpu_s_per_1k": cpu / images * 1000 if images else None,
        "own_cpu_s_per_1k":
            own / images * 1000 if images and own is not None else None,
        "command_cpu_s_per_1k":
            r["command_cpu_s"] / images * 1000 if images else None,
        "peak_pss_mb": r["peak_pss_mb"],
        "sampler_cpu_s": r["sampler_cpu_s"],
    }.items()}


def load_runs(folder, name, runs):
    """[(run, record or None)] for runs 1..runs."""
    found = []
    for i in range(1, runs + 1):
        path = os.path.join(folder, f"{name}.{i}.json")
        try:
            with open(path, encoding="utf-8") as f:
                found.append((i, json.load(f)))
        except (OSError, ValueError):
            found.append((i, None))
    return found


def rounded(v):
    return None if v is None else round(v, 4)


def fmt(v, spec="%.1f"):
    return "-" if v is None else spec % v


def verdict(r, target):
    if r is None:
        return "-"
    if target is None:
        return "%.2f" % r
    return "%.2f (target >= %s: %s)" % (r, target,
                                       "met" if r >= target else "NOT met")


def report_kind(top, kind, runs, unavailable):
    """Prints the table and ratios of one kind of image; returns its part
    of the JSON summary."""
    folder = os.path.join(top, kind)
    per = {}  # letter -> {"runs": [figures or None], ...}
    notes = []
    for letter, name, _label in CONTENDERS:
        if name in unavailable:
            per[letter] = {"not_run": unavailable[name]}
            continue
        rounds = load_runs(folder, name, runs)
        figs = []
        for i, rec in rounds:
            f = figures(rec) if rec else None
            figs.append(f)
            if f is None:
                why = ("no record" if rec is None else
                       "exit status %s" % rec.get("exit_status"))
                notes.append(f"({letter}) run {i} FAILED: {why}; see "
                             f"{os.path.join(folder, name)}.{i}.err")
        ok = [f for f in figs if f]
        med = {k: median(f[k] for f in ok) for k in
               ("images_per_s", "images_per_s_with_startup", "startup_s",
                "cpu_s_per_1k", "own_cpu_s_per_1k", "command_cpu_s_per_1k",
                "peak_pss_mb",
                "sampler_cpu_s")} if ok else {}
        versions = {}
        for _, rec in rounds:
            for k in ("torch", "torchvision", "dali", "ringfeed"):
                if rec and k in rec:
                    versions[k] = rec[k]
        per[letter] = {"runs": figs, "median": med, "versions": versions,
                       "images": ok[0]["images"] if ok else None}

    print(f"\n== {kind}: medians of {runs} runs")
    row = "  %-38s %9s %11s %8s %13s %11s"
    print(row % ("", "images/s", "incl. start", "start s", "CPU s/1k img",
                 "peak PSS MB"))
    for letter, name, label in CONTENDERS:
        p = per[letter]
        if "not_run" in p:
            print(f"  {label:38s} not run: {p['not_run']}")
            continue
        m = p["median"]
        print(row % (label, fmt(m.get("images_per_s")),
                     fmt(m.get("images_per_s_with_startup")),
                     fmt(m.get("startup_s"), "%.3f"),
                     fmt(m.get("cpu_s_per_1k"), "%.2f"),
                     fmt(m.get("peak_pss_mb"))))
    for note in notes:
        print("  " + note)
    def each(key):
        return ", ".join(
            f"({letter}) {fmt(per[letter]['median'].get(key), '%.2f')}"
            for letter, _, _ in CONTENDERS
            if per[letter].get("median")
            and per[letter]["median"].get(key) is not None)

    print("  of CPU s/1k img, the loop's own process (its threads included;"
          " the rest is its producers' or workers'): "
          f"{each('own_cpu_s_per_1k')}")
    print("  CPU s/1k img of the whole command (interpreter start and imports"
          f" included): {each('command_cpu_s_per_1k')}")
    print("  the memory sampler's own CPU s per run (in no figure): "
          f"{each('sampler_cpu_s')}")

    def rate(letter, key="images_per_s"):
        m = per[letter].get("median") or {}
        return m.get(key)

    ratios = {}
    print("  ratios of (a)'s images/s over the others':")
    print("  %-5s %-40s %-40s %s" % ("", "of the medians",
                                     "median of each round's own",
                                     "by CPU per image"))
    for label, other, target in RATIOS:
        a, o = rate("a"), rate(other)
        of_medians = a / o if a and o else None
        pairs = [fa["images_per_s"] / fo["images_per_s"]
                 for fa, fo in zip(per["a"].get("runs", []),
                                   per[other].get("runs", []))
                 if fa and fo and fo["images_per_s"] > 0]
        by_round = median(pairs) if len(pairs) == runs else None
        ca, co = rate("a", "cpu_s_per_1k"), rate(other, "cpu_s_per_1k")
        by_cpu = co / ca if ca and co else None
        ratios[label] = {"of_medians": rounded(of_medians),
                         "by_round": rounded(by_round),
                         "by_cpu": rounded(by_cpu), "target": target}
        print("  %-5s %-40s %-40s %s" % (label, verdict(of_medians, target),
                                         verdict(by_round, target),
                                         verdict(by_cpu, target)))
    return {"contenders": {name: per[letter]
                           for letter, name, _ in CONTENDERS},
            "ratios": ratios}


def report(argv):
    import argparse
    p = argparse.ArgumentParser(prog="bench_measure.py report")
    p.add_argument("dir")
    p.add_argument("--runs", type=int, required=True)
    p.add_argument("--kind", action="append", required=True)
    args = p.parse_args(argv)
    unavailable = {}
    ufolder = os.path.join(args.dir, "unavailable")
    if os.path.isdir(ufolder):
        for name in os.listdir(ufolder):
            with open(os.path.join(ufolder, name), encoding="utf-8") as f:
                unavailable[name] = f.read().strip()
    summary = {"runs": args.runs, "kinds": {}}
    for kind in args.kind:
        summary["kinds"][kind] = report_kind(args.dir, kind, args.runs,
                                             unavailable)
    failed = any(f is None
                 for k in summary["kinds"].values()
                 for c in k["contenders"].values()
                 for f in c.get("runs", []))
    summary["failed_runs"] = failed
    print(json.dumps(summary, separators=(",", ":")))
    return 1 if failed else 0


def main(argv):
    if len(argv) >= 3 and argv[0] == "run" and argv[2] == "--":
        return run(argv[1], argv[3:])
    if len(argv) == 4 and argv[0] == "sample":
        return sample(int(argv[1]), argv[2], argv[3])
    if argv and argv[0] == "report":
        return report(argv[1:])
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
