#!/usr/bin/env python3
"""Filesystem benchmark driver of bench/run.sh (see bench/README.md): the same workloads
on native ext4, fuse-overlayfs, bindfs and a treefork session, interleaved workload by
workload, plus treefork's storage-efficiency rows. Writes bench/results/<date>.md (+ .json)
and the `run` section of bench/RESULTS.md (full runs only)."""
import argparse, datetime, hashlib, json, math, os, platform, random, re, shutil, signal
import subprocess, sys, sysconfig, tempfile, time

BENCH = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH)
CACHE = "/var/tmp/fsbench-cache"
STEP_TIMEOUT = 300  # seconds; a cell that takes longer is recorded as "error (timeout)"
CLK = os.sysconf("SC_CLK_TCK")
MiB, GiB = 2**20, 2**30

FULL = dict(seq=1 * GiB, rand=256 * MiB, rand_read=64 * MiB, fio_files=10000, small_dirs=100,
            small_per=100, min_files=15000, forks=10, dup=1 * GiB)
QUICK = dict(seq=64 * MiB, rand=16 * MiB, rand_read=4 * MiB, fio_files=1000, small_dirs=10,
             small_per=100, min_files=0, forks=10, dup=64 * MiB)
cfg = FULL


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def run(args, cwd=None, timeout=STEP_TIMEOUT, env=None, check=True):
    r = subprocess.run(args, cwd=cwd, timeout=timeout, env=env, capture_output=True, text=True)
    if check and r.returncode != 0:
        tail = (r.stderr.strip() or r.stdout.strip() or "no output").splitlines()[-1].strip()
        prog = os.path.basename(args[0]) if args[0] != "bash" else args[-1].split()[2]
        raise RuntimeError(f"{prog}: exit {r.returncode}: {tail}")
    return r.stdout


def sh(cmd, cwd=None, timeout=STEP_TIMEOUT, env=None):
    return run(["bash", "-c", "set -o pipefail; " + cmd], cwd=cwd, timeout=timeout, env=env)


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def du_bytes(path):
    return int(run(["du", "-sb", path]).split()[0])


def mounted(mp):
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == mp for line in f)


def wait_mounted(mp, proc=None, secs=20):
    end = time.time() + secs
    while time.time() < end:
        if mounted(mp):
            return
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server for {mp} exited with {proc.returncode}")
        time.sleep(0.05)
    raise RuntimeError(f"{mp} not mounted after {secs}s")


def proc_cpu(pid):
    """utime + stime of a process (all threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / CLK


def proc_hwm(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return None


def pids_matching(pred):
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0")[:-1]]
        except OSError:
            continue
        if argv and pred(argv):
            out.append(int(p))
    return out


def treefork_daemon(store):
    store = os.path.realpath(store)
    def is_ours(argv):
        if argv[-1] != "daemon" or "--store" not in argv[:-1]:
            return False
        return os.path.realpath(argv[argv.index("--store") + 1]) == store
    found = pids_matching(is_ours)
    return found[0] if found else None


# ---------------------------------------------------------------- targets

class Target:
    fuse = True
    def __init__(self, work):
        self.base = os.path.join(work, self.name)
        os.makedirs(self.base)
        self.root = None
        self.pid = None

    def cpu(self):
        return proc_cpu(self.pid) if self.pid else None

    def hwm(self):
        return proc_hwm(self.pid) if self.pid else None

    def alive(self):
        return os.path.exists(f"/proc/{self.pid}")

    def reset_hwm(self):
        """Reset the process's peak RSS (clear_refs 5), so the next VmHWM is this workload's."""
        if self.pid:
            with open(f"/proc/{self.pid}/clear_refs", "w") as f:
                f.write("5\n")

    def check(self):
        if self.pid and not self.alive():
            raise RuntimeError(f"{self.name}: its server (pid {self.pid}) is gone")
        if self.fuse and not mounted(self.root):
            raise RuntimeError(f"{self.name}: {self.root} is no longer mounted")


class Native(Target):
    name, fuse = "native", False
    def start(self):
        self.root = os.path.join(self.base, "root"); os.makedirs(self.root)
    def stop(self):
        pass


class ForegroundFuse(Target):
    """A FUSE server we run in the foreground, so its pid is our child's."""
    def start(self):
        self.root = os.path.join(self.base, "mnt"); os.makedirs(self.root)
        self.log = open(os.path.join(self.base, "server.log"), "w")
        self.proc = subprocess.Popen(self.argv(), stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        self.pid = self.proc.pid
        wait_mounted(self.root, self.proc)

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        if mounted(self.root):
            subprocess.run(["fusermount3", "-u", self.root], capture_output=True)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            subprocess.run(["fusermount3", "-u", "-z", self.root], capture_output=True)
            self.proc.kill(); self.proc.wait()


class Overlay(ForegroundFuse):
    name = "fuse-overlayfs"
    def argv(self):
        d = {k: os.path.join(self.base, k) for k in ("lower", "upper", "work")}
        for p in d.values():
            os.makedirs(p)
        return ["fuse-overlayfs", "-f", "-o", f"lowerdir={d['lower']},upperdir={d['upper']},workdir={d['work']}", self.root]


class Bindfs(ForegroundFuse):
    name = "bindfs"
    def argv(self):
        src = os.path.join(self.base, "src"); os.makedirs(src)
        return ["bindfs", "-f", src, self.root]


class Treefork(Target):
    name = "treefork"
    def __init__(self, work, bin_):
        super().__init__(work)
        self.bin = bin_
        self.store = os.path.join(self.base, "store")

    def start(self):
        self.root = os.path.join(self.base, "mnt"); os.makedirs(self.root)
        # /dev/fuse unless a variant names the transport: the default (auto) takes the
        # ring whenever enable_uring is on, which another run on this machine may set.
        env = dict(os.environ, TREEFORK_TRANSPORT=os.environ.get("TREEFORK_TRANSPORT", "dev"))
        run([self.bin, "--store", self.store, "mount", self.root, "--session", "bench"], env=env)
        wait_mounted(self.root)
        self.pid = treefork_daemon(self.store)
        if not self.pid:
            raise RuntimeError("treefork daemon not found")

    def stop(self):
        tf_umount(self.bin, self.store, [self.root])


def without_writeback(start):
    """Run a target's `start` with TREEFORK_WRITEBACK=0 (the daemon it starts keeps it)."""
    os.environ["TREEFORK_WRITEBACK"] = "0"
    try:
        start()
    finally:
        del os.environ["TREEFORK_WRITEBACK"]


class TreeforkNoWb(Treefork):
    """Experiment: treefork without the kernel's writeback cache."""
    name = "treefork-nowb"
    def start(self):
        without_writeback(super().start)


class TreeforkFuser(Treefork):
    """Comparison: the same build with each mount served by a fuser session of its
    own (TREEFORK_FUSE_SERVER=fuser: 4 threads a mount, the server before issue 42)."""
    name = "treefork-fuser"
    def start(self):
        os.environ["TREEFORK_FUSE_SERVER"] = "fuser"
        try:
            super().start()
        finally:
            del os.environ["TREEFORK_FUSE_SERVER"]


class TreeforkUring(Treefork):
    """treefork served over FUSE over io_uring (`mount --transport uring`); turns
    /sys/module/fuse/parameters/enable_uring on for the run and restores it."""
    name = "treefork-uring"
    PARAM = "/sys/module/fuse/parameters/enable_uring"

    # The switch as found before the first ring target turned it on, and how many
    # ring targets are running (the last to stop restores it).
    orig, running = None, 0

    def start(self):
        if TreeforkUring.running == 0:
            if not os.path.exists(self.PARAM):
                raise RuntimeError("treefork-uring: this kernel has no FUSE over io_uring (no enable_uring parameter)")
            TreeforkUring.orig = open(self.PARAM).read().strip()
            with open(self.PARAM, "w") as f:
                f.write("Y")
        TreeforkUring.running += 1
        os.environ["TREEFORK_TRANSPORT"] = "uring"
        try:
            super().start()
        finally:
            del os.environ["TREEFORK_TRANSPORT"]

    def stop(self):
        super().stop()
        TreeforkUring.running -= 1
        if TreeforkUring.running == 0 and TreeforkUring.orig is not None:
            with open(self.PARAM, "w") as f:
                f.write(TreeforkUring.orig)


class TreeforkUringNoWb(TreeforkUring):
    """Experiment: treefork over io_uring without the kernel's writeback cache."""
    name = "treefork-uring-nowb"
    def start(self):
        without_writeback(super().start)


class TreeforkBase(Treefork):
    """A second treefork binary (e.g. the previous release), to compare two builds in one run."""
    name = "treefork-base"


def tf_umount(bin_, store, mps):
    pid = treefork_daemon(store)
    for mp in mps:
        if mounted(mp):
            r = subprocess.run([bin_, "--store", store, "umount", mp], capture_output=True, text=True, timeout=600)
            if r.returncode != 0:
                log(f"treefork umount {mp} failed: {r.stderr.strip()}; lazy unmount")
                subprocess.run(["fusermount3", "-u", "-z", mp], capture_output=True)
    if pid:  # the daemon exits after its last mount; give it time to finish flushing
        end = time.time() + 60
        while time.time() < end and os.path.exists(f"/proc/{pid}"):
            time.sleep(0.05)
        if os.path.exists(f"/proc/{pid}"):
            log(f"treefork daemon {pid} still running after its last umount; killing it")
            os.kill(pid, signal.SIGKILL)


def cleanup(work):
    """Unmount and stop whatever a (possibly interrupted) run left under `work`."""
    work = os.path.realpath(work)
    with open("/proc/self/mountinfo") as f:
        mps = [line.split()[4] for line in f if line.split()[4].startswith(work + "/")]
    for mp in sorted(mps, key=len, reverse=True):
        subprocess.run(["fusermount3", "-u", "-z", mp], capture_output=True)
        subprocess.run(["umount", "-l", mp], capture_output=True)
    ours = pids_matching(lambda argv: any(a.startswith(work + "/") or f"={work}/" in a or f",{work}/" in a for a in argv)
                         and os.path.basename(argv[0]) in ("treefork", "fuse-overlayfs", "bindfs"))
    for pid in ours:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# ---------------------------------------------------------------- corpus

def corpus_paths():
    lock = open(os.path.join(BENCH, "corpus", "Cargo.lock"), "rb").read()
    key = hashlib.sha256(lock + open(os.path.join(BENCH, "corpus", "Cargo.toml"), "rb").read()).hexdigest()[:12]
    return os.path.join(CACHE, f"corpus-{key}")


def count_files(path):
    n = 0
    for _, _, files in os.walk(path):
        n += len(files)
    return n


def build_corpus(quick):
    """`cargo vendor --locked` of bench/corpus, cached under /var/tmp; returns
    (tree dir, tar path, file count, bytes). The quick corpus is a subset: the crates
    the build workload needs plus enough others for ~2,000 files."""
    base = corpus_paths()
    tree = os.path.join(base, "full", "corpus")
    if not os.path.exists(os.path.join(base, "full", ".done")):
        log(f"vendoring the corpus into {tree} (first run only)")
        shutil.rmtree(os.path.join(base, "full"), ignore_errors=True)
        os.makedirs(os.path.join(tree, "src"))
        for f in ("Cargo.toml", "Cargo.lock", "src/lib.rs"):
            shutil.copy(os.path.join(BENCH, "corpus", f), os.path.join(tree, f))
        run(["cargo", "vendor", "--locked", "--quiet", "--manifest-path", os.path.join(tree, "Cargo.toml"),
             os.path.join(tree, "vendor")], timeout=1800)
        run(["tar", "cf", os.path.join(base, "full", "corpus.tar"), "--sort=name", "-C", os.path.join(base, "full"), "corpus"], timeout=600)
        open(os.path.join(base, "full", ".done"), "w").write("")
    if quick:
        qbase = os.path.join(base, "quick")
        if not os.path.exists(os.path.join(qbase, ".done")):
            shutil.rmtree(qbase, ignore_errors=True)
            qtree = os.path.join(qbase, "corpus")
            os.makedirs(os.path.join(qtree, "vendor"))
            for f in ("Cargo.toml", "Cargo.lock", "src"):
                src = os.path.join(tree, f)
                (shutil.copytree if os.path.isdir(src) else shutil.copy)(src, os.path.join(qtree, f))
            vendor = os.path.join(tree, "vendor")
            want = set(build_crate_dirs(vendor))
            n = 0
            for d in sorted(os.listdir(vendor)):
                if d in want or n < 2000:
                    shutil.copytree(os.path.join(vendor, d), os.path.join(qtree, "vendor", d), symlinks=True)
                    n += count_files(os.path.join(vendor, d))
            run(["tar", "cf", os.path.join(qbase, "corpus.tar"), "--sort=name", "-C", qbase, "corpus"])
            open(os.path.join(qbase, ".done"), "w").write("")
        base, tree = qbase, os.path.join(qbase, "corpus")
    else:
        base = os.path.join(base, "full")
    return tree, os.path.join(base, "corpus.tar"), count_files(tree), du_bytes(tree)


def build_crate_dirs(vendor):
    """Vendor directories of the packages in bench/buildcrate/Cargo.lock."""
    text = open(os.path.join(BENCH, "buildcrate", "Cargo.lock")).read()
    out = []
    for name, ver in re.findall(r'name = "([^"]+)"\nversion = "([^"]+)"\nsource', text):
        out.append(f"{name}-{ver}" if os.path.isdir(os.path.join(vendor, f"{name}-{ver}")) else name)
    return out


def build_tree2():
    """The second source tree: this python3's standard library (with its tests and
    __pycache__, without site-packages/dist-packages) plus /usr/include, as one tar
    cached under /var/tmp (keyed by the python version and a hash of the file listing);
    returns (top dir name, tar path, file count, bytes)."""
    stdlib = os.path.realpath(sysconfig.get_paths()["stdlib"])
    parts = [(stdlib, ("site-packages", "dist-packages")), ("/usr/include", ())]
    listing, nbytes = [], 0
    for top, skip in parts:
        for d, dirs, files in os.walk(top):
            dirs[:] = sorted(x for x in dirs if not (d == top and x in skip))
            for f in sorted(files):
                st = os.lstat(os.path.join(d, f))
                listing.append(f"{os.path.join(d, f)} {st.st_size}")
                nbytes += st.st_size
    key = hashlib.sha256("\n".join(listing).encode()).hexdigest()[:12]
    base = os.path.join(CACHE, f"tree2-py{platform.python_version()}-{key}")
    tar = os.path.join(base, "tree2.tar")
    if not os.path.exists(os.path.join(base, ".done")):
        log(f"assembling {tar} from {stdlib} and /usr/include (first run only)")
        shutil.rmtree(base, ignore_errors=True); os.makedirs(base)
        args = ["tar", "cf", tar, "--sort=name", "--transform=s,^,tree2/,S", "--anchored"]
        for top, skip in parts:
            args += [f"--exclude={os.path.basename(top)}/{x}" for x in skip]
            args += ["-C", os.path.dirname(top), os.path.basename(top)]
        run(args, timeout=600)
        open(os.path.join(base, ".done"), "w").write("")
    return "tree2", tar, len(listing), nbytes


# ---------------------------------------------------------------- workloads
# A workload is a list of steps run back to back on one target; every target runs
# the whole workload before the next workload starts. Each step is one row.

class Row:
    def __init__(self, key, label, unit, amount=None, cold=False, reps=1):
        """reps > 1: the step is repeatable (read-only, or it resets its own state) and the
        row keeps the best (fastest) of `reps` runs, to damp this shared VM's noise."""
        self.key, self.label, self.unit, self.amount, self.cold, self.reps = key, label, unit, amount, cold, reps
        if reps > 1:
            self.label += f", best of {reps}"
    @property
    def tput(self):
        return self.amount is not None


def fio(root, name, *opts, timeout=STEP_TIMEOUT):
    out = run(["fio", f"--name={name}", "--output-format=json", "--invalidate=0", *opts], cwd=root, timeout=timeout)
    return json.loads(out[out.index("{"):])


def timed(fn):
    t = time.perf_counter(); fn(); return time.perf_counter() - t


GIT_ENV = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null", GIT_AUTHOR_NAME="bench",
               GIT_AUTHOR_EMAIL="bench@localhost", GIT_COMMITTER_NAME="bench", GIT_COMMITTER_EMAIL="bench@localhost",
               GIT_AUTHOR_DATE="2026-01-01T00:00:00Z", GIT_COMMITTER_DATE="2026-01-01T00:00:00Z")
GIT = "git -c gc.auto=0 -c core.fsmonitor=false -c core.untrackedCache=false -c init.defaultBranch=main"


def make_workloads(corpus, bin_, tree2=None):
    seq, rand, rr, nf = cfg["seq"], cfg["rand"], cfg["rand_read"], cfg["fio_files"]
    nd, npd = cfg["small_dirs"], cfg["small_per"]
    tree_files, tree_bytes = corpus[2], corpus[3]
    W = {}

    def seq_write(root):
        return timed(lambda: fio(root, "seqw", "--filename=seq.bin", "--rw=write", "--bs=1M", f"--size={seq}",
                                 "--ioengine=psync", "--end_fsync=1", "--scramble_buffers=1"))
    def seq_read(root):
        return timed(lambda: fio(root, "seqr", "--filename=seq.bin", "--rw=read", "--bs=1M", f"--size={seq}", "--ioengine=psync"))
    W["seq"] = dict(steps=[
        (Row("seq_write", f"fio seq write {seq // MiB} MiB, bs=1M, end_fsync=1", "MiB/s", seq / MiB), seq_write),
        (Row("seq_read_cold", "fio seq read of it, cold", "MiB/s", seq / MiB, cold=True), seq_read),
        (Row("seq_read_warm", "fio seq read of it, warm", "MiB/s", seq / MiB, reps=2), seq_read)],
        after=lambda root: os.unlink(os.path.join(root, "seq.bin")))

    def rand_layout(root):
        fio(root, "layout", "--filename=rand.bin", "--rw=write", "--bs=1M", f"--size={rand}", "--end_fsync=1")
    def rand_write(root):
        return timed(lambda: fio(root, "randw", "--filename=rand.bin", "--rw=randwrite", "--bs=4k", f"--size={rand}",
                                 "--ioengine=psync", "--end_fsync=1", "--randrepeat=1", "--scramble_buffers=1"))
    def rand_read(root):
        return timed(lambda: fio(root, "randr", "--filename=rand.bin", "--rw=randread", "--bs=4k", f"--size={rand}",
                                 f"--io_size={rr}", "--ioengine=psync", "--randrepeat=1"))
    W["rand"] = dict(before=rand_layout, steps=[
        (Row("rand_write", f"fio 4 KiB random write over a {rand // MiB} MiB file ({rand // 4096:,} writes), end_fsync=1", "IOPS", rand / 4096), rand_write),
        (Row("rand_read", f"fio 4 KiB random read of it, cold ({rr // 4096:,} reads)", "IOPS", rr / 4096, cold=True), rand_read)],
        after=lambda root: os.unlink(os.path.join(root, "rand.bin")))

    def fio_files(engine):
        def step(root):
            j = fio(os.path.join(root, "fiofiles"), "f", f"--ioengine={engine}", f"--nrfiles={nf}", "--filesize=4k", "--bs=4k",
                    "--openfiles=1", "--file_service_type=sequential", "--create_on_open=1", "--fallocate=none", "--unlink=0")["jobs"][0]
            ios = j["read"]["total_ios"] + j["write"]["total_ios"]
            if ios != nf:
                raise RuntimeError(f"fio {engine} did {ios} operations, expected {nf}")
            return j["job_runtime"] / 1000
        return step
    W["fiofiles"] = dict(before=lambda root: os.mkdir(os.path.join(root, "fiofiles")), steps=[
        (Row("fio_create", f"fio ioengine=filecreate, {nf:,} files", "s"), fio_files("filecreate")),
        (Row("fio_stat", f"fio ioengine=filestat, {nf:,} files", "s", reps=3), fio_files("filestat")),
        (Row("fio_delete", f"fio ioengine=filedelete, {nf:,} files", "s"), fio_files("filedelete"))],
        after=lambda root: shutil.rmtree(os.path.join(root, "fiofiles")))

    def small(phase):
        return lambda root: float(run([sys.executable, os.path.join(BENCH, "smallfiles.py"), root, str(nd), str(npd), phase]))
    W["smallfiles"] = dict(steps=[
        (Row(f"small_{p}", f"{p} {nd * npd:,} small files in {nd} dirs" if p == "create" else f"{p} them", "s",
             reps=3 if p in ("stat", "readdir") else 1), small(p))
        for p in ("create", "stat", "readdir", "rename", "unlink")])

    def tree_steps(top, tar, nfiles, nbytes, prefix=""):
        """The source-tree rows over the tree in `tar` (top dir `top`); row keys get `prefix`."""
        name = f"{top} ({nfiles:,} files)"
        src = lambda root: os.path.join(root, top)
        def out_of(cmd, env=None):  # a step timing `cmd` in the tree, with its output
            def step(root):
                t = time.perf_counter(); out = sh(cmd, cwd=src(root), env=env)
                return time.perf_counter() - t, out.strip()
            return step
        tar_x = lambda root: timed(lambda: run(["tar", "xf", tar, "-C", root]))
        git_commit = out_of(f"{GIT} init -q && {GIT} add -A && {GIT} commit -q -m {top} && {GIT} rev-parse HEAD", GIT_ENV)
        git_status = out_of(f"{GIT} status --porcelain | wc -l", GIT_ENV)
        grep = out_of("LC_ALL=C grep -r -F 0xdeadbeef . | wc -l")
        du = out_of("du -s . | cut -f1")
        def du_after_grep(root):
            # grep opens and closes every file: with the writeback cache the kernel drops
            # each file's st_blocks at close (fuse_flush), so the du right after pays a
            # GETATTR per file. Only the du is timed.
            sh("LC_ALL=C grep -r -F 0xdeadbeef . | wc -l", cwd=src(root))
            return du(root)
        find = out_of("find . | wc -l")
        return [
            (Row(prefix + "tar_x", f"tar xf {name}, {nbytes / MiB:.0f} MiB", "s"), tar_x),
            (Row(prefix + "git_commit", f"git init + add -A + commit of {name}", "s"), git_commit),
            (Row(prefix + "git_status_warm", f"git status of {name}, warm", "s", reps=3), git_status),
            (Row(prefix + "git_status_cold", f"git status of {name}, cold", "s", cold=True), git_status),
            (Row(prefix + "grep_cold", f"grep -r of {name}, cold", "s", cold=True), grep),
            (Row(prefix + "grep_warm", f"grep -r of {name}, warm", "s", reps=2), grep),
            (Row(prefix + "du", f"du -s (KiB) of {name}, warm", "s", reps=3), du),
            (Row(prefix + "du_after_grep", f"du -s (KiB) of {name} right after grep -r of it", "s", reps=2), du_after_grep),
            (Row(prefix + "find", f"find {name} | wc -l, warm", "s", reps=3), find)]
    W["tree"] = dict(steps=tree_steps("corpus", corpus[1], tree_files, tree_bytes))
    if tree2:
        W["tree2"] = dict(steps=tree_steps(*tree2, prefix="tree2."),
                          after=lambda root: shutil.rmtree(os.path.join(root, tree2[0])))
    src = lambda root: os.path.join(root, "corpus")

    def ensure_tree(root):
        if not os.path.exists(src(root)):
            run(["tar", "xf", corpus[1], "-C", root])
    def build_before(root):
        ensure_tree(root)
        shutil.copytree(os.path.join(BENCH, "buildcrate"), os.path.join(root, "build"), ignore=shutil.ignore_patterns("target"))
    def cargo(crate, vendor, target_dir=None):
        env = {k: v for k, v in os.environ.items() if not k.startswith("CARGO_") and k not in ("RUSTC_WRAPPER", "RUSTFLAGS")}
        run(["cargo", "build", "--offline", "--locked", "--quiet", "--config", "source.crates-io.replace-with='corpus'",
             "--config", f"source.corpus.directory='{vendor}'"] + (["--target-dir", target_dir] if target_dir else []),
            cwd=crate, env=env, timeout=900)
    def warm_toolchain():
        """An untimed build on the host first, so that no target pays for loading rustc
        and LLVM from a disk cache that an earlier cold row dropped."""
        warm = os.path.join(CACHE, "warm-target")
        cargo(os.path.join(BENCH, "buildcrate"), os.path.join(corpus[0], "vendor"), target_dir=warm)
        shutil.rmtree(warm, ignore_errors=True)
    def cargo_build(root):
        shutil.rmtree(os.path.join(root, "build", "target"), ignore_errors=True)
        t = time.perf_counter()
        cargo(os.path.join(root, "build"), os.path.join(src(root), "vendor"))
        dt = time.perf_counter() - t
        run([os.path.join(root, "build", "target", "debug", "fsbench-build")])
        return dt
    W["build"] = dict(first=warm_toolchain, before=build_before, steps=[
        (Row("cargo_build", "cargo build (serde + serde_json + derive, 11 crates, debug), sources and target dir on the fs", "s", reps=2), cargo_build)])

    def rm_rf(root):
        return timed(lambda: run(["rm", "-rf", src(root), os.path.join(root, "build")]))
    W["rm"] = dict(before=ensure_tree, steps=[(Row("rm_rf", "rm -rf of the tree (+ build dir)", "s"), rm_rf)])
    return W


def run_step(t, row, fn, res):
    try:
        t.check()
        best = None
        for _ in range(row.reps):
            if row.cold:
                drop_caches()
            c0 = t.cpu()
            out = fn(t.root)
            c1 = t.cpu()
            out = out if isinstance(out, tuple) else (out, None)
            if best is None or out[0] < best[0][0]:
                best = out, c0, c1
        (secs, extra), c0, c1 = best
        val = row.amount / secs if row.tput else secs
        res[row.key][t.name] = dict(value=val, secs=secs, cpu=None if c0 is None else c1 - c0, out=extra)
        cpu = "" if c0 is None else f", server cpu {c1 - c0:.2f}s"
        log(f"  {t.name:15s} {row.key:16s} {val:10.2f} {row.unit}{cpu}" + (f"  [{extra}]" if extra else ""))
    except Exception as e:  # noqa: BLE001 — a failing cell must not stop the run
        msg = f"timeout after {STEP_TIMEOUT} s" if isinstance(e, subprocess.TimeoutExpired) else str(e)[:200]
        res[row.key][t.name] = dict(error=msg)
        log(f"  {t.name:15s} {row.key:16s} ERROR {msg}")


# ---------------------------------------------------------------- storage rows (treefork only)

def storage_rows(bin_, work, corpus, rand_file):
    tree, _, nfiles, raw = corpus
    out = {"raw_tree": raw, "tree_files": nfiles}
    base = os.path.join(work, "storage"); os.makedirs(base)
    store, mp = os.path.join(base, "s1"), os.path.join(base, "m1")
    os.makedirs(mp)
    try:
        t = time.perf_counter()
        run([bin_, "--store", store, "mount", mp, "--session", "main", "--from", tree], timeout=1200)
        out["import_secs"] = time.perf_counter() - t
        run([bin_, "-C", mp, "checkpoint", "-m", "import"])
        out["import_hwm"] = proc_hwm(treefork_daemon(store))
        tf_umount(bin_, store, [mp])
        out["import_store"] = du_bytes(store)
        log(f"  import: {out['import_secs']:.1f}s, store {out['import_store'] / MiB:.1f} MiB for {raw / MiB:.1f} MiB")

        run([bin_, "--store", store, "mount", mp, "--session", "main"])
        files = sorted(os.path.relpath(os.path.join(d, f), mp) for d, _, fs in os.walk(mp) for f in fs)
        k = max(1, len(files) // 100)
        forks, t = [], time.perf_counter()
        for i in range(cfg["forks"]):
            fmp = os.path.join(base, f"fork{i}"); os.makedirs(fmp)
            run([bin_, "-C", mp, "fork", f"f{i}", "--mount", fmp]); forks.append(fmp)
            for rel in random.Random(i).sample(files, k):
                p = os.path.join(fmp, rel)
                data = open(p, "rb").read()
                mid = len(data) // 2
                open(p, "wb").write(data[:mid] + f"\n// fork {i} was here\n".encode() + data[mid:])
            run([bin_, "-C", fmp, "checkpoint", "-m", f"fork {i}: {k} files changed"])
        out["forks_secs"] = time.perf_counter() - t
        out["forks_files_changed"] = k
        out["forks_hwm"] = proc_hwm(treefork_daemon(store))
        tf_umount(bin_, store, forks + [mp])
        out["forks_store"] = du_bytes(store)
        log(f"  {cfg['forks']} forks x {k} files: store {out['forks_store'] / MiB:.1f} MiB")
    except Exception as e:  # noqa: BLE001
        out["error_forks"] = str(e)[:300]; log(f"  storage (import/forks) ERROR {e}")
        tf_umount(bin_, store, [os.path.join(base, x) for x in os.listdir(base) if x.startswith(("m1", "fork"))])

    store, mp = os.path.join(base, "s2"), os.path.join(base, "m2")
    os.makedirs(mp)
    try:
        run([bin_, "--store", store, "mount", mp, "--session", "main"])
        t = time.perf_counter()
        for name in ("a.bin", "b.bin"):
            run(["cp", rand_file, os.path.join(mp, name)], timeout=600)
        run(["sync", "-f", mp])
        out["dup_secs"] = time.perf_counter() - t
        tf_umount(bin_, store, [mp])
        out["dup_store"] = du_bytes(store)
        out["dup_size"] = os.path.getsize(rand_file)
        log(f"  same {out['dup_size'] / MiB:.0f} MiB twice: store {out['dup_store'] / MiB:.1f} MiB")
    except Exception as e:  # noqa: BLE001
        out["error_dup"] = str(e)[:300]; log(f"  storage (dup) ERROR {e}")
        tf_umount(bin_, store, [mp])
    return out


# ---------------------------------------------------------------- report

def versions(bin_):
    def v(args, pick=lambda s: s.splitlines()[0]):
        try:
            r = subprocess.run(args, capture_output=True, text=True, timeout=30)
            return pick((r.stdout + r.stderr).strip())
        except Exception:  # noqa: BLE001
            return "?"
    ovl = lambda s: next((l.split("version")[-1].strip(" :") for l in s.splitlines() if l.startswith("fuse-overlayfs")), s.splitlines()[0])
    return {"treefork": v([bin_, "--version"]) + " (" + v(["git", "-C", REPO, "rev-parse", "--short", "HEAD"]) +
                        (", dirty tree" if v(["git", "-C", REPO, "status", "--porcelain", "--", "src", "Cargo.toml", "Cargo.lock"], lambda s: s) else "") + ")",
            "fio": v(["fio", "--version"]), "fuse-overlayfs": "fuse-overlayfs " + v(["fuse-overlayfs", "--version"], ovl),
            "bindfs": v(["bindfs", "--version"]), "fuse3": "fuse3 " + v(["fusermount3", "--version"], lambda s: s.split()[-1]), "git": v(["git", "--version"]),
            "cargo": v(["cargo", "--version"]), "tar": v(["tar", "--version"])}


def machine():
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GiB
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    return f"{os.cpu_count()} cores ({cpu}), {mem:.0f} GiB RAM, Linux {platform.release()}"


def fmt(v):
    if v >= 1000: return f"{v:,.0f}"
    if v >= 100: return f"{v:.0f}"
    if v >= 10: return f"{v:.1f}"
    if v >= 1: return f"{v:.2f}"
    return f"{v:.3f}"


# Rows whose command output may legitimately differ between targets: du counts st_blocks,
# which each filesystem reports its own way. (The git commit id, grep and find counts must
# match native: the same commit id means every target stored the same bytes.)
INFO_ONLY = ("du", "du_after_grep")


def report(res, rows, tnames, hwm, storage, meta):
    L = [f"# Filesystem benchmark — {meta['date']}", "",
         f"Machine: {meta['machine']}. Work dir on {meta['workfs']}.", "",
         "Versions: " + "; ".join(meta["versions"].values()) + ".", "",
         f"Mode: {meta['mode']}. Wall time of the whole run: {meta['wall'] / 60:.1f} min.", "",
         "Each cell: the figure (seconds, or MiB/s / IOPS where the unit says so) · its ratio to native "
         "(slowdown, >1 = slower than native; for MiB/s and IOPS rows native/target) · CPU seconds the FUSE "
         "server process consumed during that cell (utime+stime, all threads). Workloads are interleaved: "
         "each one runs on every target in turn before the next starts. Cold rows follow "
         "`sync; echo 3 > /proc/sys/vm/drop_caches`. Rows marked \"best of N\" keep the fastest of N runs; "
         "the others are one run. The VM shares its disk and CPUs: differences under ~20 % are noise. "
         "Servers run with their default options; details in bench/README.md.", ""]
    head = ["workload", "unit"] + tnames
    L += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    ratios = {t: [] for t in tnames}
    cpu_tot = {t: 0.0 for t in tnames}
    odd = []
    for r in rows:
        cells = []
        nat = res[r.key].get("native", {})
        for t in tnames:
            c = res[r.key].get(t)
            if c is None:
                cells.append("–"); continue
            if "error" in c:
                cells.append("error"); continue
            s = fmt(c["value"])
            if t != "native" and "value" in nat:
                ratio = (nat["value"] / c["value"]) if r.tput else (c["value"] / nat["value"])
                ratios[t].append(ratio)
                s += f" · {ratio:.2f}×"
            if c.get("cpu") is not None:
                s += f" · cpu {c['cpu']:.1f}"
                cpu_tot[t] += c["cpu"]
            if c.get("out") is not None and "out" in nat and nat.get("out") is not None and c["out"] != nat["out"] and r.key.split(".")[-1] not in INFO_ONLY:
                s += " ⚠"
                odd.append(f"{r.label} on {t}: output `{c['out']}`, native `{nat['out']}`")
            cells.append(s)
        L.append(f"| {r.label.replace('|', chr(92) + '|')} | {r.unit} | " + " | ".join(cells) + " |")
    gm = []
    for t in tnames:
        if t == "native" or not ratios[t]:
            gm.append("1" if t == "native" else "–"); continue
        g = math.exp(sum(math.log(x) for x in ratios[t]) / len(ratios[t]))
        n_err = sum(1 for r in rows if "error" in res[r.key].get(t, {}))
        gm.append(f"**{g:.2f}×** ({len(ratios[t])} rows" + (f", {n_err} errors" if n_err else "") + ")")
    L.append("| **geometric mean of ratios** | | " + " | ".join(gm) + " |")
    L.append("| total server CPU over these rows | s | " + " | ".join("–" if t == "native" else f"{cpu_tot[t]:.1f}" for t in tnames) + " |")
    errs = [f"{r.label} on {t}: {res[r.key][t]['error']}" for r in rows for t in tnames if "error" in res[r.key].get(t, {})]
    if errs or odd:
        L += ["", "Errors and output mismatches:"] + [f"- {e}" for e in errs + odd]
    for r in rows:
        if r.key.split(".")[-1] in INFO_ONLY and any(res[r.key].get(t, {}).get("out") for t in tnames):
            L += ["", f"Output of `{r.label}` (differences here are expected, not errors): " + ", ".join(
                f"{t} `{res[r.key][t]['out']}`" for t in tnames if res[r.key].get(t, {}).get("out"))]
    if hwm:
        ws = [w for w in ALL_WORKLOADS if any(w in h for h in hwm.values())]
        L += ["", "Peak RSS of each FUSE server (VmHWM, MiB): over the whole run, and within each workload "
              "(reset with `clear_refs` before it):", "",
              "| server | whole run | " + " | ".join(ws) + " |", "|---|---|" + "---|" * len(ws)]
        for t, h in hwm.items():
            vals = [v for v in h.values() if v]
            if vals:
                L.append(f"| {t} | **{max(vals) / MiB:.0f}** | " + " | ".join(f"{h[w] / MiB:.0f}" if h.get(w) else "–" for w in ws) + " |")
    if storage:
        s = storage
        raw = s["raw_tree"]
        L += ["", "Storage efficiency (treefork only; `du -sb` of the store after unmounting, which flushes everything):", "",
              "| case | raw data | store | store / raw |", "|---|---|---|---|"]
        if "import_store" in s:
            L.append(f"| import of the corpus tree (`mount --from`, {s['tree_files']:,} files; import took {s['import_secs']:.1f} s) "
                     f"| {raw / MiB:.1f} MiB | {s['import_store'] / MiB:.1f} MiB | {s['import_store'] / raw:.2f} |")
        if "forks_store" in s:
            L.append(f"| + {cfg['forks']} forks, each changing 1 % of the files ({s['forks_files_changed']:,}) and checkpointed "
                     f"| {raw / MiB:.1f} MiB (one copy) | {s['forks_store'] / MiB:.1f} MiB "
                     f"(+{(s['forks_store'] - s['import_store']) / MiB:.1f} MiB over the import) | {s['forks_store'] / raw:.2f} |")
        if "dup_store" in s:
            L.append(f"| the same {s['dup_size'] / MiB:.0f} MiB random file written twice under two names ({s['dup_secs']:.1f} s) "
                     f"| {s['dup_size'] / MiB:.0f} MiB (one copy) | {s['dup_store'] / MiB:.1f} MiB | {s['dup_store'] / s['dup_size']:.2f} |")
        for k in ("error_forks", "error_dup"):
            if k in s:
                L.append(f"| {k.replace('error_', '')} | error: {s[k]} | | |")
        L += ["", "Peak RSS of the daemon serving the import store: "
              + ", ".join(f"{k.split('_')[0]} {s[k] / MiB:.0f} MiB" for k in ("import_hwm", "forks_hwm") if s.get(k))]
    return "\n".join(L) + "\n"


def update_section(path, name, text):
    """Replace the generated section `name` of RESULTS.md, keeping hand-written notes."""
    begin, end = f"<!-- {name}: generated by bench/{name}.sh -->", f"<!-- /{name} -->"
    old = open(path).read() if os.path.exists(path) else ""
    block = f"{begin}\n{text.rstrip()}\n{end}"
    if begin in old and end in old:
        new = old[:old.index(begin)] + block + old[old.index(end) + len(end):]
    else:
        new = block + "\n\n" + old.lstrip() if old.strip() else block + "\n"
    open(path, "w").write(new)


# ---------------------------------------------------------------- main

ALL_TARGETS = ["native", "fuse-overlayfs", "bindfs", "treefork", "treefork-uring"]
# Not in a default run: treefork variants for experiments (see bench/README.md).
EXTRA_TARGETS = ["treefork-nowb", "treefork-uring-nowb", "treefork-fuser", "treefork-base"]
ALL_WORKLOADS = ["seq", "rand", "fiofiles", "smallfiles", "tree", "tree2", "build", "rm", "storage"]


def main():
    global cfg
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bin", default=os.path.join(REPO, "target/release/treefork"))
    ap.add_argument("--bin-base", help="a second treefork binary, run as target treefork-base (A/B of two builds)")
    ap.add_argument("--work", help="empty work dir (default: a new /var/tmp/fsbench-*)")
    ap.add_argument("--quick", action="store_true", help="small sizes and a small corpus, for development")
    ap.add_argument("--targets", default=",".join(ALL_TARGETS), help="comma-separated subset of " + ",".join(ALL_TARGETS))
    ap.add_argument("--workloads", default=",".join(ALL_WORKLOADS), help="comma-separated subset of " + ",".join(ALL_WORKLOADS))
    ap.add_argument("--cleanup", metavar="WORK", help="only unmount/stop what a run left under WORK, and exit")
    a = ap.parse_args()
    if a.cleanup:
        cleanup(a.cleanup); return
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    cfg = QUICK if a.quick else FULL
    if a.bin_base and "treefork-base" not in a.targets.split(","):
        a.targets += ",treefork-base"
    if "treefork-base" in a.targets.split(",") and not a.bin_base:
        ap.error("target treefork-base needs --bin-base")
    tnames = [t for t in ALL_TARGETS + EXTRA_TARGETS if t in a.targets.split(",")]
    wnames = [w for w in ALL_WORKLOADS if w in a.workloads.split(",")]
    bad = set(a.targets.split(",")) - set(ALL_TARGETS + EXTRA_TARGETS) | set(a.workloads.split(",")) - set(ALL_WORKLOADS)
    if bad:
        ap.error(f"unknown target/workload: {', '.join(sorted(bad))}")
    full = not a.quick and tnames == ALL_TARGETS and wnames == ALL_WORKLOADS
    bin_ = os.path.abspath(a.bin)
    work = a.work or tempfile.mkdtemp(prefix="fsbench-", dir="/var/tmp")
    work = os.path.realpath(work)
    t_start = time.time()
    vers = versions(bin_)  # now: the source tree may change while the run goes on
    date = datetime.datetime.now(datetime.timezone.utc)
    workfs = " ".join(run(["findmnt", "-n", "-o", "FSTYPE,SOURCE", "-T", work]).split())

    corpus = build_corpus(a.quick)
    log(f"corpus: {corpus[2]:,} files, {corpus[3] / MiB:.0f} MiB ({corpus[1]})")
    if corpus[2] <= cfg["min_files"]:
        sys.exit(f"corpus has {corpus[2]} files, expected > {cfg['min_files']}")

    tree2 = build_tree2() if "tree2" in wnames else None
    if tree2:
        log(f"tree2: {tree2[2]:,} files, {tree2[3] / MiB:.0f} MiB ({tree2[1]})")
    W = make_workloads(corpus, bin_, tree2)
    rows, res, hwm, storage = [], {}, {}, None
    targets = []
    try:
        cls = {"native": Native, "fuse-overlayfs": Overlay, "bindfs": Bindfs, "treefork": lambda w: Treefork(w, bin_),
               "treefork-uring": lambda w: TreeforkUring(w, bin_),
               "treefork-nowb": lambda w: TreeforkNoWb(w, bin_),
               "treefork-fuser": lambda w: TreeforkFuser(w, bin_),
               "treefork-uring-nowb": lambda w: TreeforkUringNoWb(w, bin_),
               "treefork-base": lambda w: TreeforkBase(w, os.path.abspath(a.bin_base))}
        for n in tnames:
            t = cls[n](work)
            try:
                t.start()
            except RuntimeError as e:
                if n != "treefork-uring" or "treefork-uring" not in ALL_TARGETS:
                    raise
                log(f"RING UNAVAILABLE: {e}; the treefork-uring column is left out")
                continue
            targets.append(t)
            log(f"{n}: {t.root}" + (f" (server pid {t.pid})" if t.pid else ""))
        for w in wnames:
            if w == "storage":
                continue
            log(f"== {w}")
            for row, _ in W[w]["steps"]:
                rows.append(row); res[row.key] = {}
            if "first" in W[w]:
                try:
                    W[w]["first"]()
                except Exception as e:  # noqa: BLE001
                    log(f"  warm-up of {w} failed: {e}")
            for t in targets:
                try:
                    hwm.setdefault(t.name, {})["mount"] = hwm.get(t.name, {}).get("mount") or t.hwm()
                    t.reset_hwm()
                except OSError:
                    pass
                try:
                    if "before" in W[w]:
                        W[w]["before"](t.root)
                except Exception as e:  # noqa: BLE001
                    log(f"  {t.name}: setup of {w} failed: {e}")
                for row, fn in W[w]["steps"]:
                    run_step(t, row, fn, res)
                try:
                    hwm[t.name][w] = t.hwm()
                except OSError:
                    pass
                try:
                    if "after" in W[w]:
                        W[w]["after"](t.root)
                except Exception as e:  # noqa: BLE001
                    log(f"  {t.name}: cleanup of {w} failed: {e}")
    finally:
        for t in reversed(targets):
            try:
                t.stop()
            except Exception as e:  # noqa: BLE001
                log(f"stopping {t.name}: {e}")
        for t in targets:
            shutil.rmtree(t.base, ignore_errors=True)
    if "storage" in wnames:
        log("== storage (treefork)")
        rand_file = os.path.join(work, "random.bin")
        sh(f"head -c {cfg['dup']} /dev/urandom > {rand_file}")
        try:
            storage = storage_rows(bin_, work, corpus, rand_file)
        finally:
            os.unlink(rand_file)
            cleanup(work)
    meta = dict(date=date.strftime("%Y-%m-%d %H:%M UTC"), machine=machine(), workfs=workfs, versions=vers,
                mode=("full" if full else ("quick" if a.quick else "full sizes") + f", targets {','.join(tnames)}, workloads {','.join(wnames)}"),
                wall=time.time() - t_start)
    text = report(res, rows, [t for t in tnames], {k: v for k, v in hwm.items() if k != "native"}, storage, meta)
    print(text)
    raw = dict(meta=meta, results=res, rows=[vars(r) for r in rows], hwm=hwm, storage=storage)
    if full:
        os.makedirs(os.path.join(BENCH, "results"), exist_ok=True)
        stamp = date.strftime("%Y-%m-%d")
        open(os.path.join(BENCH, "results", f"{stamp}.md"), "w").write(text)
        json.dump(raw, open(os.path.join(BENCH, "results", f"{stamp}.json"), "w"), indent=1)
        update_section(os.path.join(BENCH, "RESULTS.md"), "run", text)
        log(f"wrote bench/results/{stamp}.md and the run section of bench/RESULTS.md")
    else:
        open("/var/tmp/fsbench-last.md", "w").write(text)
        json.dump(raw, open("/var/tmp/fsbench-last.json", "w"), indent=1)
        log("partial run: report in /var/tmp/fsbench-last.md (bench/RESULTS.md untouched)")


if __name__ == "__main__":
    main()
