#!/usr/bin/python3
"""Checks that the desktop integration and the documentation shipped in the package agree with
the programs:

    check_integration.py SOURCE_DIR TOWERS_CLI [TOWERS] --version X.Y.Z

* every towers-cli command in `towers-cli --help`, and every option in each command's --help,
  is in the man page towers-cli.1 (in that command's section) and in the bash completion;
  every option of `towers --help` is in towers.1; every model of `towers-cli models --json` is
  completed;
* the bash completion really completes (run in bash with bash-completion loaded);
* the man pages render without groff warnings; the desktop entry passes desktop-file-validate
  and the AppStream metainfo appstreamcli validate; its release is the CMake version;
* `--version` of both programs starts with "<program> X.Y.Z" and names the backends.

Exit status 0 passed, 1 some check failed, 77 a tool it needs is missing (the reason is printed).
"""

import json
import os
import re
import shutil
import subprocess
import sys

failures = []


def check(ok, what):
    print(("ok      " if ok else "FAILED  ") + what)
    if not ok:
        failures.append(what)


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=60, **kw)


def help_options(text):
    """Long options listed under 'Options:' in a QCommandLineParser help text."""
    section = text.split("Options:", 1)[1].split("Arguments:", 1)[0]
    return sorted(set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", section)))


def man_text(path):
    with open(path, encoding="utf-8") as f:
        return f.read().replace("\\-", "-")


def man_sections(text):
    """{command: text of its '.SS "towers-cli command ..."' section}."""
    parts = re.split(r'^\.SS "towers-cli (\S+)[^"]*"\s*$', text, flags=re.M)
    return {parts[i]: parts[i + 1].split("\n.SH ", 1)[0] for i in range(1, len(parts), 2)}


def completion_options(script):
    """{command: set of options} from the case arms of the completion script."""
    body = script.split('case $command in', 1)[1].split("esac", 1)[0]
    arms = re.findall(r"^\s*([a-z][a-z-]*)\)\s*(?:\n\s*)?options=\"([^\"]*)\"", body, flags=re.M)
    return {name: set(opts.split()) for name, opts in arms}


def complete(script_path, words):
    """What bash completion offers for the command line `words` (the last word is completed)."""
    line = " ".join(words)
    code = f"""
source /usr/share/bash-completion/bash_completion
source {script_path}
COMP_WORDS=({' '.join(repr(w) for w in words)})
COMP_CWORD={len(words) - 1}
COMP_LINE={line!r}
COMP_POINT={len(line)}
_towers_cli towers-cli {words[-1]!r} {words[-2]!r}
printf '%s\\n' "${{COMPREPLY[@]}}"
"""
    r = run(["bash", "-c", code])
    return set(r.stdout.split())


def main():
    args = sys.argv[1:]
    if "--version" not in args or len(args) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    i = args.index("--version")
    version = args[i + 1]
    del args[i:i + 2]
    source, cli = args[0], args[1]
    gui = args[2] if len(args) > 2 else None

    for tool, package in (("groff", "groff-base"), ("desktop-file-validate", "desktop-file-utils"),
                          ("appstreamcli", "appstream"), ("bash", "bash")):
        if not shutil.which(tool):
            print(f"check_integration: SKIPPED: {tool} is not installed (Debian package {package}; "
                  "packaging/install-deps.sh --test installs it)", file=sys.stderr)
            return 77
    if not os.path.exists("/usr/share/bash-completion/bash_completion"):
        print("check_integration: SKIPPED: bash-completion is not installed "
              "(packaging/install-deps.sh --test installs it)", file=sys.stderr)
        return 77

    man_cli_path = os.path.join(source, "packaging/man/towers-cli.1")
    completion_path = os.path.join(source, "packaging/completion/towers-cli.bash")
    man_cli = man_text(man_cli_path)
    sections = man_sections(man_cli)
    with open(completion_path, encoding="utf-8") as f:
        completion = f.read()
    completed = completion_options(completion)

    # Commands and their options.
    top = run([cli, "--help"]).stdout
    commands = re.findall(r"^  ([a-z][a-z-]*)\s{2,}", top, flags=re.M)
    check(len(commands) >= 8, f"towers-cli --help lists the commands ({', '.join(commands)})")
    check(set(commands) == set(sections), "towers-cli.1 has a section for each command, and no other")
    listed = set(re.search(r'commands="([^"]*)"', completion).group(1).split())
    check(set(commands) == listed, "the completion knows every command, and no other")
    for c in commands:
        opts = help_options(run([cli, c, "--help"]).stdout)
        # --help is documented once for every command, in the DESCRIPTION.
        missing_man = [o for o in opts if o != "--help" and o not in sections.get(c, "")]
        check(not missing_man, f"towers-cli.1 documents every option of '{c}'"
              + (f" (missing {missing_man})" if missing_man else ""))
        missing_comp = sorted(set(opts) - completed.get(c, set()))
        extra_comp = sorted(completed.get(c, set()) - set(opts))
        check(not missing_comp and not extra_comp, f"the completion offers exactly the options of '{c}'"
              + (f" (missing {missing_comp}, extra {extra_comp})" if missing_comp or extra_comp else ""))

    models = [m["name"] for m in json.loads(run([cli, "models", "--json"]).stdout)]
    offered = re.search(r'models="([^"]*)"', completion).group(1).split()
    check(sorted(models) == sorted(offered), f"the completion offers every model ({', '.join(models)})")

    # The completion, run for real.
    check(complete(completion_path, ["towers-cli", "tr"]) == {"train"}, "completes 'tr' to 'train'")
    check(complete(completion_path, ["towers-cli", "train", "--to"]) == {"--towers"},
          "completes train's '--to' to --towers")
    check({"--threads-per-tower", "--json"} <= complete(completion_path, ["towers-cli", "train", "--"]),
          "offers train's options after '--'")
    check(complete(completion_path, ["towers-cli", "train", "--optimizer", "n"]) == {"nesterov"},
          "completes an optimizer name")
    check(complete(completion_path, ["towers-cli", "download", "c"]) == {"cifar10", "cifar100", "cifar100-coarse"},
          "completes a dataset to download")

    # The GUI's options.
    if gui:
        man_gui = man_text(os.path.join(source, "packaging/man/towers.1"))
        opts = help_options(run([gui, "--help"], env={**os.environ, "QT_QPA_PLATFORM": "offscreen"}).stdout)
        missing = [o for o in opts if o not in man_gui]
        check(bool(opts) and not missing, "towers.1 documents every option of towers"
              + (f" (missing {missing})" if missing else ""))

    # The man pages render cleanly.
    for page in ("towers-cli.1", "towers.1"):
        r = run(["groff", "-man", "-ww", "-z", "-Tutf8", os.path.join(source, "packaging/man", page)])
        check(r.returncode == 0 and not r.stderr.strip(), f"{page} renders without warnings {r.stderr.strip()}")
        with open(os.path.join(source, "packaging/man", page), encoding="utf-8") as f:
            check(f'"Towers {version}"' in f.read(), f"{page} names version {version}")

    # Desktop entry and AppStream metainfo.
    desktop = os.path.join(source, "resources/linux/io.github.towers.Towers.desktop")
    r = run(["desktop-file-validate", desktop])
    check(r.returncode == 0 and "error" not in r.stdout.lower(), f"desktop-file-validate {r.stdout.strip()}")
    metainfo = os.path.join(source, "resources/linux/io.github.towers.Towers.metainfo.xml")
    r = run(["appstreamcli", "validate", "--no-net", metainfo])
    check(r.returncode == 0, "appstreamcli validate " + (r.stdout.strip().splitlines() or [""])[-1])
    with open(metainfo, encoding="utf-8") as f:
        check(f'<release version="{version}"' in f.read(), f"the metainfo's newest release is {version}")

    # --version.
    for program, name in ((cli, "towers-cli"), (gui, "towers")):
        if not program:
            continue
        out = run([program, "--version"], env={k: v for k, v in os.environ.items()
                                               if k not in ("DISPLAY", "WAYLAND_DISPLAY")}).stdout
        check(out.startswith(f"{name} {version}") and "Backends: cpu" in out,
              f"{name} --version (without a display): {out.splitlines()[0] if out else '(nothing)'}")

    # A wrong flag is a usage error (exit status 2) that names the flag, as documented.
    for program in (cli, gui):
        if not program:
            continue
        r = run([program, "--no-such-flag"], env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})
        check(r.returncode == 2 and "no-such-flag" in r.stderr,
              f"{os.path.basename(program)} --no-such-flag exits 2 naming the flag (got {r.returncode})")

    print(f"{len(failures)} check(s) failed" if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
