"""ringfeed_build - the PEP 517 build backend of the ringfeed package.

`pip install .` and `pip wheel .` call it (pyproject.toml names it, with
backend-path). It builds the C library and the producer helper with the
project's own autotools build, the one build system of record: autoreconf
when ./configure is missing, then configure and make of those two targets
alone in a temporary folder (the source tree is only read), and writes
the wheel with zipfile: the package python/ringfeed/ (its modules and
py.typed) plus ringfeed/_native/libringfeed.so.0 and
ringfeed/_native/ringfeed-producer, where the library finds its helper
(beside itself). The tag is
py3-none-<platform>: ctypes loads the library, so one wheel serves every
CPython from 3.9 on. Standard library only: it builds offline.

Settings, from the environment or pip's --config-settings (-C):
  CC, CFLAGS, LDFLAGS, PKG_CONFIG_PATH  passed to configure as usual
      (CFLAGS with -fdebug-prefix-map added: see _with_prefix_map);
  SOURCE_DATE_EPOCH  the date of the wheel's files (reproducible builds);
  configure-args / RINGFEED_CONFIGURE_ARGS  more configure options;
  debug-info=keep  ship the library and helper with their debug sections
                   (by default they are stripped of them, keeping symbols).
"""

import base64
import csv
import hashlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

TOP = Path(__file__).resolve().parent.parent.parent
PACKAGE = "ringfeed"
# What the library finds its helper beside (lib/consumer/spawn.c).
NATIVE = "_native"
HELPER = "ringfeed-producer"


def say(text):
    print(f"ringfeed_build: {text}", flush=True)


def stop(text):
    """Ends the hook with a message and no traceback."""
    print(file=sys.stderr)
    raise SystemExit(f"ringfeed_build: error: {text}")


# ---- pyproject.toml and metadata ------------------------------------------

# The TOML this project's pyproject.toml uses: [tables], and keys whose
# values are strings or lists of strings (Python 3.9 and 3.10 have no
# tomllib, and the backend has no dependencies).
_TOKEN = re.compile(r'(?P<nl>\n)|(?P<ws>[ \t\r]+)|(?P<comment>#[^\n]*)'
                    r'|(?P<str>"(?:[^"\\\n]|\\.)*")|(?P<punct>[\[\],=])'
                    r'|(?P<key>[A-Za-z0-9_.-]+)')


def _tokens(text):
    pos, line = 0, 1
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise ValueError(f"pyproject.toml:{line}: the build backend reads "
                             "only [tables] and keys set to strings or lists "
                             "of strings")
        kind = m.lastgroup
        if kind == "nl":
            line += 1
        if kind not in ("ws", "comment"):
            yield kind, m.group(), line
        pos = m.end()
    yield "nl", "\n", line


def read_toml(text):
    """The tables of a pyproject.toml in the subset described above, as
    tomllib.loads() gives them."""
    toks = list(_tokens(text))
    result, table, i = {}, None, 0

    def expect(kind, value=None):
        nonlocal i
        k, v, line = toks[i]
        if k != kind or (value is not None and v != value):
            raise ValueError(f"pyproject.toml:{line}: unexpected {v!r} "
                             "(the build backend reads only [tables] and "
                             "keys set to strings or lists of strings)")
        i += 1
        return v

    def skip_newlines():
        nonlocal i
        while i < len(toks) and toks[i][0] == "nl":
            i += 1

    def value():
        if toks[i][0] == "str":
            return _string(expect("str"))
        expect("punct", "[")
        items = []
        skip_newlines()
        while toks[i][1] != "]":
            items.append(_string(expect("str")))
            skip_newlines()
            if toks[i][1] == ",":
                expect("punct", ",")
                skip_newlines()
        expect("punct", "]")
        return items

    skip_newlines()
    while i < len(toks):
        if toks[i][1] == "[":
            expect("punct", "[")
            table = result
            for part in expect("key").split("."):
                table = table.setdefault(part, {})
            expect("punct", "]")
        else:
            if table is None:
                table = result
            key = expect("key")
            expect("punct", "=")
            table[key] = value()
        expect("nl")
        skip_newlines()
    return result


def _string(token):
    # TOML's basic strings escape as JSON's do (\uXXXX, \", \\, \n...).
    import json
    return json.loads(token)


def version():
    """The package's version: configure.ac's AC_INIT."""
    text = (TOP / "configure.ac").read_text()
    m = re.search(r"AC_INIT\(\[([^\]]+)\],\s*\[([^\]]+)\]", text)
    if not m:
        stop("configure.ac has no AC_INIT([name], [version])")
    return m.group(2)


def project():
    """pyproject.toml's [project] table, with its version filled in."""
    table = read_toml((TOP / "pyproject.toml").read_text())["project"]
    table = dict(table, version=version())
    return table


def metadata_text():
    """The core metadata (METADATA in the wheel, PKG-INFO in the sdist)."""
    p = project()
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {p['name']}",
        f"Version: {p['version']}",
    ]
    if "description" in p:
        lines.append(f"Summary: {p['description']}")
    if p.get("keywords"):
        lines.append(f"Keywords: {','.join(p['keywords'])}")
    lines += [f"Classifier: {c}" for c in p.get("classifiers", [])]
    if "requires-python" in p:
        lines.append(f"Requires-Python: {p['requires-python']}")
    lines += [f"Requires-Dist: {d}" for d in p.get("dependencies", [])]
    for extra, deps in p.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {d}; extra == "{extra}"' for d in deps]
    body = ""
    if "readme" in p:
        lines.append("Description-Content-Type: text/markdown")
        body = "\n" + (TOP / p["readme"]).read_text()
    return "\n".join(lines) + "\n" + body


def dist_info():
    return f"{PACKAGE}-{version()}.dist-info"


def wheel_tag():
    """py3-none-PLATFORM: any CPython 3, this machine's platform (the
    wheel holds native code but no Python extension)."""
    platform = re.sub(r"[-.]", "_", sysconfig.get_platform())
    return f"py3-none-{platform}"


def wheel_text():
    return ("Wheel-Version: 1.0\n"
            f"Generator: ringfeed_build {version()}\n"
            "Root-Is-Purelib: false\n"
            f"Tag: {wheel_tag()}\n")


# ---- running the autotools build ---------------------------------------

# What a failed step's output says is missing, and the Debian packages
# that bring it.
_MISSING = (
    (r"no acceptable C compiler|C compiler cannot create executables",
     "build-essential"),
    (r"pkg-config script could not be found|PKG_PROG_PKG_CONFIG|"
     r"PKG_CHECK_MODULES|PKG_INSTALLDIR", "pkg-config"),
    (r"LT_INIT|libtoolize: not found|AM_PROG_AR", "libtool"),
    (r"aclocal: not found|automake: not found|AM_INIT_AUTOMAKE", "automake"),
    (r"fatal error: jpeglib\.h", "libjpeg62-turbo-dev"),
    (r"fatal error: turbojpeg\.h", "libturbojpeg0-dev"),
    (r"fatal error: zstd\.h", "libzstd-dev"),
    (r"fatal error: png\.h", "libpng-dev"),
    (r"fatal error: webp/", "libwebp-dev"),
)


def _advice(output):
    """A sentence naming the Debian packages that the failed step's output
    says are missing (a check for a tool, a library or a header that
    failed), else "": a step may fail with every package installed."""
    wanted = re.findall(r"apt-get install ([a-z0-9][a-z0-9.+ -]*[a-z0-9+])",
                        output)
    for pattern, package in _MISSING:
        if re.search(pattern, output):
            wanted.append(package)
    if not wanted:
        return ""
    names = " ".join(dict.fromkeys(" ".join(wanted).split()))
    return f"install the missing packages: apt-get install {names}"


def _kept_log(log):
    """A copy of the failed step's log (configure's config.log) outside
    the temporary build folder, which goes when the build stops; its
    path, or None when there is no log."""
    if not log.is_file():
        return None
    fd, kept = tempfile.mkstemp(prefix=f"ringfeed-{log.stem}-",
                                suffix=".log")
    with os.fdopen(fd, "wb") as out:
        out.write(log.read_bytes())
    return kept


def _failed(what, cwd, output):
    """Ends the build after `what` failed with `output` (its lines): the
    Debian packages to install when a check for one failed, else the
    step's own last lines and the path of its log, kept."""
    text = "".join(output)
    advice = _advice(text)
    if what == "make":
        # The first error is the compiler's; make's own come after.
        errors = [ln.strip() for ln in output if "error:" in ln]
        reason = f" ({errors[0]})" if errors else ""
        stop(f"the C build failed{reason}; the whole output is above"
             + (f"; {advice}" if advice else ""))
    if advice:
        errors = [ln.strip() for ln in output
                  if re.search(r"error|not found", ln, re.I)]
        reason = f" ({errors[-1]})" if errors else ""
        stop(f"{what} failed{reason}; {advice}")
    last = [ln.rstrip() for ln in output if ln.strip()][-5:]
    kept = None
    if what == "configure":
        kept = _kept_log(Path(cwd) / "config.log")
    stop(f"{what} failed; its last lines:\n"
         + "".join(f"    {ln}\n" for ln in last)
         + (f"its whole log (config.log) is kept in {kept}" if kept
            else "its whole output is above"))


def run(cmd, cwd, what):
    """Runs cmd in cwd, printing the command and its output; on failure
    ends the build with a message saying what to install or look at."""
    say(f"{what}: {shlex.join(str(c) for c in cmd)}  (in {cwd})")
    try:
        proc = subprocess.Popen([str(c) for c in cmd], cwd=cwd,
                                stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True,
                                errors="replace")
    except FileNotFoundError:
        package = {"autoreconf": "autoconf automake libtool pkg-config",
                   "make": "build-essential"}.get(Path(cmd[0]).name)
        stop(f"{what}: {cmd[0]} not found"
             + (f"; install it: apt-get install {package}" if package else ""))
    output = []
    for line in proc.stdout:
        sys.stdout.write(line)
        output.append(line)
    sys.stdout.flush()
    if proc.wait() != 0:
        _failed(what, cwd, output)
    return "".join(output)


def configure_args(build, config_settings):
    args = ["--disable-static", "--disable-dependency-tracking",
            "--without-cuda", "--enable-silent-rules"]
    args += shlex.split(os.environ.get("RINGFEED_CONFIGURE_ARGS", ""))
    setting = (config_settings or {}).get("configure-args", "")
    if isinstance(setting, list):
        setting = " ".join(setting)
    return _with_prefix_map(args + shlex.split(setting), build)


# The characters a folder may have for its path to go in CFLAGS bare:
# configure passes CFLAGS on unquoted, and make's shell reads it, so
# neither a quote nor a space nor a shell character can be written there.
_PLAIN_PATH = re.compile(r"[A-Za-z0-9_./+,:@%-]+")


def _with_prefix_map(args, build):
    """args with -fdebug-prefix-map=BUILD=. added to CFLAGS: the debug
    information names the compiler's folder, the temporary build folder
    (a random name), and the linker's build-id hashes it, so two builds
    of one tree gave native files that differ in it, even stripped. The
    user's CFLAGS (the environment's, else the last CFLAGS= among the
    configure options, which configure takes) are kept; without any,
    configure's default -g -O2."""
    folders = dict.fromkeys([str(build), str(Path(build).resolve())])
    if not all(_PLAIN_PATH.fullmatch(f) for f in folders):
        say(f"the build folder {build} has a character CFLAGS cannot "
            "hold: its path stays in the debug information, and the "
            "native files' build-id differs from build to build (a TMPDIR "
            "of letters, digits and ._-/ gives the same wheel each time)")
        return args
    maps = " ".join(f"-fdebug-prefix-map={f}=." for f in folders)
    given = [i for i, a in enumerate(args) if a.startswith("CFLAGS=")]
    if given:
        args = list(args)
        args[given[-1]] += f" {maps}"
        return args
    return args + [f"CFLAGS={os.environ.get('CFLAGS', '-g -O2')} {maps}"]


# What configure calls the source tree from the build folder: a link to
# TOP, so that the build sees it as the relative path source/. automake's
# configure refuses a source folder whose path holds a space, a tab, a
# quote, #, $, & or a backslash ("unsafe srcdir value"), and a checkout
# may be in "My Projects".
SOURCE_LINK = "source"


def configure(build, config_settings):
    """autoreconf if the tree has no configure yet (a git checkout), then
    configure in the folder `build`, the tree seen through a link. A
    tree configured in place is refused first, before autoreconf would
    change it."""
    if (TOP / "config.status").exists():
        # configure would refuse: "source directory already configured".
        stop(f"{TOP} was configured in place (./configure there left "
             "config.status), and pip builds in a folder of its own: run "
             f"make distclean in {TOP}, or pip install from a clean "
             "checkout (a build of your own belongs in a folder such as "
             "_build/, as in README.md)")
    if not (TOP / "configure").exists():
        if not os.access(TOP, os.W_OK):
            stop(f"{TOP} has no configure script and cannot be written to "
                 "run autoreconf: build from a release tarball, or run "
                 "autoreconf -fi in the source tree first")
        run(["autoreconf", "-fi"], TOP, "autoreconf")
    (build / SOURCE_LINK).symlink_to(TOP, target_is_directory=True)
    say(f"{SOURCE_LINK}/ is a link to {TOP}")
    run([f"{SOURCE_LINK}/configure",
         *configure_args(build, config_settings)], build, "configure")


def _jobs():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _libtool_var(la_file, name):
    m = re.search(rf"^{name}='([^']*)'", la_file.read_text(), re.M)
    return m.group(1) if m else ""


def _is_elf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def _check_no_build_paths(path, build):
    """No RPATH/RUNPATH of a shipped file points into the temporary build
    folder (libtool's uninstalled objects may)."""
    readelf = shutil.which("readelf")
    if not readelf:
        say("readelf not found: run paths not checked")
        return
    out = subprocess.run([readelf, "-d", path], capture_output=True,
                         text=True, check=True).stdout
    for line in out.splitlines():
        if ("RPATH" in line or "RUNPATH" in line) and str(build) in line:
            stop(f"{path.name} would look for libraries in the temporary "
                 f"build folder: {line.strip()}")


def build_native(build, config_settings):
    """Configures and builds the library and the helper in `build`;
    returns {name in _native/: file} for the wheel."""
    configure(build, config_settings)
    run(["make", f"-j{_jobs()}", "libringfeed.la", f"tools/{HELPER}"],
        build, "make")
    la = build / "libringfeed.la"
    soname = _libtool_var(la, "dlname")  # libringfeed.so.0
    real = _libtool_var(la, "library_names").split()[0]  # .so.0.0.0
    library = build / ".libs" / real
    # A libtool build may leave a wrapper script where the program goes,
    # the real executable in .libs/ (this helper links the internal
    # library statically, so there is none: checked all the same).
    helper = build / "tools" / HELPER
    if not _is_elf(helper):
        helper = build / "tools" / ".libs" / HELPER
    for path in (library, helper):
        if not path.is_file() or not _is_elf(path):
            stop(f"the build left no {path.name} at {path}")
        _check_no_build_paths(path, build)
    return {soname: _shipped(library, build, config_settings),
            HELPER: _shipped(helper, build, config_settings)}


def _shipped(path, build, config_settings):
    """The file the wheel carries for `path`: a copy without its debug
    sections (strip --strip-debug: a quarter of the size; the symbols
    stay, for backtraces and perf), or the file itself with
    --config-settings debug-info=keep, or when strip is missing."""
    if (config_settings or {}).get("debug-info") == "keep":
        return path
    strip = shutil.which("strip")
    if not strip:
        say(f"strip not found: {path.name} keeps its debug information")
        return path
    stripped = build / "shipped" / path.name
    stripped.parent.mkdir(exist_ok=True)
    shutil.copy2(path, stripped)
    run([strip, "--strip-debug", stripped], build, "strip")
    return stripped


# ---- writing the wheel and the sdist -----------------------------------

def _epoch():
    """SOURCE_DATE_EPOCH when set (reproducible builds), else now; never
    before 1980 (zip)."""
    return max(int(os.environ.get("SOURCE_DATE_EPOCH", time.time())),
               315532800)


def _record_hash(data):
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


# What the package is made of in python/ringfeed/: its modules and the
# PEP 561 marker; _native/ comes from the build.
_PACKAGE_FILE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\.py|py\.typed")


def _taken(rel):
    """Whether a file at `rel` in python/ringfeed/ is one of the package's
    (a module or py.typed, in no hidden folder, __pycache__ or _native/)
    rather than an editor's backup (loader.py~, .loader.py.swp), a
    patch's leftover (.orig, .rej) or a stray build's."""
    folders = rel.parts[:-1]
    return (_PACKAGE_FILE.fullmatch(rel.name) is not None
            and not any(f.startswith(".") or f == "__pycache__"
                        for f in folders)
            and (not folders or folders[0] != NATIVE))


def package_files():
    """(name in the wheel, file) for the package's own files: its
    modules and py.typed under python/ringfeed/. Any other file there is
    left out, and the build output says which (byte code aside)."""
    root = TOP / "python" / PACKAGE
    if not (root / "__init__.py").is_file():
        stop(f"no package at {root} (python/{PACKAGE}/__init__.py)")
    found, left = [], []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if path.is_dir() or "__pycache__" in rel.parts:
            continue
        if _taken(rel):
            found.append((f"{PACKAGE}/{rel.as_posix()}", path))
        else:
            left.append(rel.as_posix())
    if left:
        say(f"left out of the wheel (only modules and py.typed go in): "
            f"{', '.join(left)} (in {root})")
    return found


def write_wheel(wheel_directory, native):
    name = f"{PACKAGE}-{version()}-{wheel_tag()}.whl"
    info = dist_info()
    entries = [(arc, path.read_bytes(), 0o644)
               for arc, path in package_files()]
    entries += [(f"{PACKAGE}/{NATIVE}/{n}", path.read_bytes(), 0o755)
                for n, path in sorted(native.items())]
    entries += [(f"{info}/METADATA", metadata_text().encode(), 0o644),
                (f"{info}/WHEEL", wheel_text().encode(), 0o644)]
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    for arc, data, _ in entries:
        writer.writerow([arc, _record_hash(data), len(data)])
    writer.writerow([f"{info}/RECORD", "", ""])
    entries.append((f"{info}/RECORD", record.getvalue().encode(), 0o644))
    target = Path(wheel_directory) / name
    stamp = time.gmtime(_epoch())[:6]
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as whl:
        for arc, data, mode in entries:
            entry = zipfile.ZipInfo(arc, date_time=stamp)
            entry.external_attr = (0o100000 | mode) << 16  # regular file
            entry.compress_type = zipfile.ZIP_DEFLATED
            whl.writestr(entry, data)
    say(f"wrote {target}")
    return name


# ---- PEP 517 hooks ----------------------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    info = Path(metadata_directory) / dist_info()
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(metadata_text())
    (info / "WHEEL").write_text(wheel_text())
    return info.name


def build_wheel(wheel_directory, config_settings=None,
                metadata_directory=None):
    os.makedirs(wheel_directory, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ringfeed-build-") as tmp:
        native = build_native(Path(tmp), config_settings)
        return write_wheel(wheel_directory, native)


def _no_editable():
    """pip install -e: refused here, with what to do instead. The package
    loads the library from _native/ beside its own files, which
    python/ringfeed/ in the source tree does not hold (the build only
    reads the tree); without these hooks pip refuses in its own terms
    (a backend "missing the 'build_editable' hook")."""
    stop("ringfeed has no editable install (pip install -e): the package "
         "loads the C library from beside its own files, and the source "
         "tree's python/ringfeed/ has none. Run pip install . again after "
         "a change, or work in the tree with a build of it (README.md, "
         "Installing) and PYTHONPATH=python "
         "RINGFEED_LIBRARY=_build/.libs/libringfeed.so "
         "(docs/python.md, Building and installing)")


def get_requires_for_build_editable(config_settings=None):
    _no_editable()


def build_editable(wheel_directory, config_settings=None,
                   metadata_directory=None):
    _no_editable()


def build_sdist(sdist_directory, config_settings=None):
    """The release tarball's files (make distdir: the Makefile's list,
    with configure), plus PKG-INFO, as NAME-VERSION.tar.gz."""
    os.makedirs(sdist_directory, exist_ok=True)
    base = f"{PACKAGE}-{version()}"
    with tempfile.TemporaryDirectory(prefix="ringfeed-sdist-") as tmp:
        build = Path(tmp)
        configure(build, config_settings)
        run(["make", f"distdir={base}", "distdir"], build, "make")
        (build / base / "PKG-INFO").write_text(metadata_text())
        target = Path(sdist_directory) / f"{base}.tar.gz"
        epoch = _epoch()

        def normalise(entry):
            entry.uid = entry.gid = 0
            entry.uname = entry.gname = ""
            entry.mtime = epoch
            entry.mode = 0o755 if entry.mode & 0o111 else 0o644
            return entry

        with tarfile.open(target, "w:gz", format=tarfile.PAX_FORMAT) as tar:
            tar.add(build / base, arcname=base, filter=normalise)
    say(f"wrote {target}")
    return target.name
