#!/usr/bin/env python3
"""Find every mwtrain command line shipped in deploy/ and rewrite it to run on this machine.

Why: the scripts, manifests and READMEs in deploy/ are what users copy; a renamed or removed
flag must fail a test, not a user's 64-GPU job. test_commands.sh runs what this prints.

Marking. A shipped command is the line after a `# mwtrain-command` line (a shell or YAML
comment, or a line in a Markdown code block) plus its backslash continuations. Any other
mwtrain invocation in a command position (a non-comment line of a script or manifest, a
Markdown code block) is an error, so a command cannot escape the test by lacking its marker.
`$(mwtrain ...)` substitutions are not commands of their own and are not checked.

Rewriting, per command (words split as the shell would, without expanding anything):
  - cut at the first control operator or redirection (`||`, `&&`, `;`, `|`, `>`, `2>` ...);
  - the binary is the first word named mwtrain (any path) or $MWTRAIN / ${MWTRAIN...};
    or, with none, deploy/mpirun/run.sh HOSTFILE (the launcher script: its words after the
    hostfile are train flags), run here as `env MWTRAIN=... CKPT_DIR=TMP/... bash
    DEPLOY_DIR/mpirun/run.sh LOCAL_HOSTFILE flags...`;
    the words before it (mpirun/srun and their options, exec, timeout, env settings) become
    `mpirun -n 2 --oversubscribe` when they launch MPI ranks, else nothing;
  - --epochs N -> min(N, 2) (train: 2 when absent); --steps-per-epoch -> 2 (added to train
    when absent); --test-examples N -> min(N, 256) (train and eval: 256 when absent, so
    each epoch does not evaluate all 10,000 test images);
    --threads -> 1; --data-dir -> the local data directory; --hostfile -> a local hostfile;
    --checkpoint-dir, --summary-dir, --dump-weights, --tf-config -> under the temporary
    directory, one folder per source file, the same value mapping to the same place (so a
    train, its resume and its eval share a checkpoint directory); a --tf-config file is
    written there with a 2-worker cluster on localhost;
  - "$@" is dropped; ${VAR:-default} becomes default; any other $ left in a word that is
    not one of the values replaced above is an error (the command could not be checked).

Open MPI settings. A multi-node launch must read deploy/mpirun/mca-params.conf (the settings
that make a lost node end the job instead of hanging mpirun): every mpirun/mpiexec command
outside deploy/local/ (one machine) must pass `--tune .../mca-params.conf`, kept in the local
run as `--tune DEPLOY_DIR/mpirun/mca-params.conf` so mpirun really reads the file; a file that
launches with srun must export OMPI_MCA_mca_base_param_files=.../mca-params.conf. Anything else
is an error naming the file and line.

Output, one line per command: FILE:LINE <tab> shell-quoted argv; or FILE:LINE <tab> ERROR
<tab> message. Usage: extract_commands.py DEPLOY_DIR MWTRAIN TMPDIR DATA_DIR HOSTFILE
"""
import os
import re
import shlex
import sys

MARKER = "# mwtrain-command"
SUBCOMMANDS = ("train", "eval", "cluster", "tf-config", "summary", "version", "help")
PATH_FLAGS = ("--checkpoint-dir", "--summary-dir", "--dump-weights", "--tf-config")
CONTROL = {"||", "&&", ";", "|", "&", "|&", ";;"}
LAUNCHERS = ("mpirun", "mpiexec", "srun", "orterun", "prterun")
RUN_SH = "mpirun/run.sh"  # the launcher script: `.../mpirun/run.sh HOSTFILE [train flags]`
BINARY_VAR = re.compile(r"^\$\{?MWTRAIN(:-[^}]*)?\}?$")
DEFAULT_VAR = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*:-([^}$]*)\}")
# An invocation in command position: the binary (a path ending in mwtrain, or $MWTRAIN)
# followed by a subcommand, not preceded by "$(" (a substitution).
INVOCATION = re.compile(
    r"(?<![\[(\w/.\"'-])[\"']?(?:[\w./-]*/)?(?:mwtrain|\$\{?MWTRAIN[^\s\"']*)[\"']?\s+(%s)\b"
    % "|".join(re.escape(s) for s in SUBCOMMANDS))
TF_CONFIG_2 = ('{"cluster":{"worker":["localhost:2222","localhost:2223"]},'
               '"task":{"type":"worker","index":0}}')


class Bad(Exception):
    pass


def is_binary(word):
    return os.path.basename(word) == "mwtrain" or BINARY_VAR.match(word) is not None


def sanitize(s):
    return re.sub(r"[^A-Za-z0-9._-]+", "_", s).strip("_") or "_"


def commands(path):
    """Yield (line number, joined command text, None) for each marked command, and
    (line number, None, message) for an unmarked invocation or a marker with nothing after
    it."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    markdown = path.endswith(".md")
    in_code = False
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        if markdown and stripped.startswith("```"):
            in_code = not in_code
            i += 1
            continue
        if stripped == MARKER:
            j = i + 1
            if j >= len(lines) or not lines[j].strip():
                yield i + 1, None, "'%s' with no command on the next line" % MARKER
                i += 1
                continue
            parts = []
            while j < len(lines):
                text = lines[j].rstrip()
                if text.endswith("\\"):
                    parts.append(text[:-1])
                    j += 1
                    continue
                parts.append(text)
                break
            yield i + 2, " ".join(p.strip() for p in parts), None
            i = j + 1
            continue
        checked = in_code if markdown else not stripped.startswith("#")
        if checked and INVOCATION.search(lines[i]):
            yield i + 1, None, ("mwtrain command without a '%s' line before it (the deploy "
                                "test runs marked commands only)" % MARKER)
        i += 1


def expand(word):
    """${VAR:-default} -> default; raise Bad if a $ is left."""
    out = DEFAULT_VAR.sub(lambda m: m.group(1), word)
    if "$" in out:
        raise Bad("cannot check %r: it needs a shell variable; write ${VAR:-default}, a "
                  "literal, or use the variable only as a path flag's value" % word)
    return out


TUNE_FILE = "mca-params.conf"


def tune_args(launcher, rel, file_text, deploy):
    """The --tune option for the local run, after checking the launcher reads mca-params.conf."""
    names = [os.path.basename(w) for w in launcher]
    if "srun" in names:
        if not re.search(r"OMPI_MCA_mca_base_param_files=\S*" + re.escape(TUNE_FILE), file_text):
            raise Bad("srun launch without OMPI_MCA_mca_base_param_files=.../%s exported in the "
                      "file (deploy/mpirun/%s: Open MPI's fail-fast settings)"
                      % (TUNE_FILE, TUNE_FILE))
        return []
    value = None
    for k, w in enumerate(launcher):
        if w == "--tune" and k + 1 < len(launcher):
            value = launcher[k + 1]
        elif w.startswith("--tune="):
            value = w[len("--tune="):]
    if value is None or not value.endswith(TUNE_FILE):
        if rel.startswith("deploy/local/"):
            return []
        raise Bad("mpirun without --tune .../%s (deploy/mpirun/%s: the settings a multi-node "
                  "job needs to fail fast)" % (TUNE_FILE, TUNE_FILE))
    return ["--tune", os.path.join(os.path.abspath(deploy), "mpirun", TUNE_FILE)]


def rewrite(text, folder, mwtrain, data_dir, hostfile, rel="", file_text="", deploy="deploy"):
    words = shlex.split(text, comments=True)
    for k, w in enumerate(words):
        if w in CONTROL or re.match(r"^\d*[<>]", w):
            words = words[:k]
            break
    b = next((k for k, w in enumerate(words) if is_binary(w)), None)
    r = next((k for k, w in enumerate(words) if w.endswith(RUN_SH)), None)
    if b is None and r is not None:
        # deploy/mpirun/run.sh HOSTFILE [train flags]: the launcher script itself, run here
        # on the local hostfile with its checkpoints under the temporary directory
        if r + 1 >= len(words):
            raise Bad("%s without its HOSTFILE in: %s" % (RUN_SH, text))
        args = ["train"] + words[r + 2:]
        sub = "train"
        out = ["env", "MWTRAIN=" + mwtrain, "CKPT_DIR=" + os.path.join(folder, "run_sh"),
               "bash", os.path.join(os.path.abspath(deploy), RUN_SH), hostfile]
    elif b is None:
        raise Bad("no mwtrain binary (mwtrain, a path ending in /mwtrain, or $MWTRAIN) in: "
                  + text)
    else:
        launcher = words[:b]
        mpi = any(os.path.basename(w) in LAUNCHERS for w in launcher)
        args = words[b + 1:]
        if not args:
            raise Bad("mwtrain without a subcommand in: " + text)
        sub = expand(args[0])
        out = ["mpirun"] + tune_args(launcher, rel, file_text, deploy) + \
            ["-n", "2", "--oversubscribe"] if mpi else []
        out += [mwtrain, sub]
    have_steps = have_epochs = have_test = False
    k = 1
    while k < len(args):
        w = args[k]
        k += 1
        if w in ("$@", "$*"):
            continue
        name, eq, value = w.partition("=")
        if not name.startswith("--") or name in ("--",):
            out.append(expand(w))
            continue
        takes = name in PATH_FLAGS or name in ("--epochs", "--steps-per-epoch", "--threads",
                                               "--data-dir", "--hostfile", "--test-examples")
        if not takes:
            out.append(expand(w))
            continue
        if not eq:
            if k >= len(args):
                out.append(name)  # mwtrain will report the missing value
                break
            value = args[k]
            k += 1
        if name == "--epochs":
            try:
                n = int(expand(value))
            except (Bad, ValueError):
                n = 2
            out += [name, str(min(max(n, 1), 2))]
            have_epochs = True
        elif name == "--test-examples":
            try:
                n = int(expand(value))
            except (Bad, ValueError):
                n = 256
            out += [name, str(min(n, 256) if n > 0 else 256)]
            have_test = True
        elif name == "--steps-per-epoch":
            out += [name, "2"]
            have_steps = True
        elif name == "--threads":
            out += [name, "1"]
        elif name == "--data-dir":
            out += [name, data_dir]
        elif name == "--hostfile":
            out += [name, hostfile]
        else:
            local = os.path.join(folder, sanitize(value))
            if name == "--tf-config":
                os.makedirs(folder, exist_ok=True)
                with open(local, "w", encoding="utf-8") as f:
                    f.write(TF_CONFIG_2)
            out += [name, local]
    if sub == "train" and not have_steps:
        out += ["--steps-per-epoch", "2"]
    if sub == "train" and not have_epochs:
        out += ["--epochs", "2"]
    if sub in ("train", "eval") and not have_test:
        out += ["--test-examples", "256"]
    return out


def main():
    deploy, mwtrain, tmp, data_dir, hostfile = sys.argv[1:6]
    root = os.path.dirname(os.path.abspath(deploy))
    files = []
    for d, dirs, names in os.walk(deploy):
        dirs.sort()
        files += [os.path.join(d, n) for n in sorted(names)]
    for path in files:
        rel = os.path.relpath(path, root)
        folder = os.path.join(tmp, sanitize(rel))
        try:
            found = list(commands(path))
            with open(path, encoding="utf-8") as f:
                file_text = f.read()
        except UnicodeDecodeError:
            continue  # not text
        for line, text, error in found:
            if error:
                print("%s:%d\tERROR\t%s" % (rel, line, error))
                continue
            try:
                argv = rewrite(text, folder, mwtrain, data_dir, hostfile, rel, file_text,
                               deploy)
                print("%s:%d\t%s" % (rel, line, shlex.join(argv)))
            except (Bad, ValueError) as e:
                print("%s:%d\tERROR\t%s" % (rel, line, e))


if __name__ == "__main__":
    main()
