"""The everyday programs of an image's userland, as busybox and GNU coreutils/procps print them:
each is `tool(sandbox, argv, stdin, env) -> (exit code, stdout, stderr)` and reads the
container's modelled filesystem, process table and network (kubesim/userland/net.py)."""

from __future__ import annotations

import base64
import itertools
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from kubesim.apps.tmpfs import SHM_PATH, landing
from kubesim.userland import net

if TYPE_CHECKING:
    from kubesim.userland.exec import Sandbox

Result = tuple[int, str, str]
Tool = Callable[["Sandbox", list[str], str, dict[str, str]], Result]
TOOLS: dict[str, Tool] = {}


def tool(*names: str) -> Callable[[Tool], Tool]:
    def register(fn: Tool) -> Tool:
        for n in names:
            TOOLS[n] = fn
        return fn
    return register


def _busybox(sb: Sandbox) -> bool:
    return sb.land.family in ("busybox", "alpine")


def _abs(sb: Sandbox, path: str, env: dict[str, str]) -> str:
    return path if path.startswith("/") else env.get("PWD", "/").rstrip("/") + "/" + path


def _flags(argv: list[str], with_value: str = "") -> tuple[set[str], dict[str, str], list[str]]:
    """Short flags (`-la` → {l, a}), flags taking a value (`with_value`), and the operands."""
    flags: set[str] = set()
    values: dict[str, str] = {}
    rest: list[str] = []
    i = 1
    while i < len(argv):
        a = argv[i]
        if a == "--":
            rest += argv[i + 1:]
            break
        if a.startswith("--"):
            k, _, v = a[2:].partition("=")
            values[k] = v
            flags.add(k)
        elif a.startswith("-") and len(a) > 1 and not a[1:].isdigit():
            j = 1
            while j < len(a):
                ch = a[j]
                if ch in with_value:
                    values[ch] = a[j + 1:] if j + 1 < len(a) else (argv[i + 1] if i + 1 < len(argv) else "")
                    if j + 1 >= len(a):
                        i += 1
                    break
                flags.add(ch)
                j += 1
        else:
            rest.append(a)
        i += 1
    return flags, values, rest


def _no_file(sb: Sandbox, prog: str, path: str) -> str:
    if _busybox(sb):
        return f"{prog}: can't open '{path}': No such file or directory\n"
    return f"{prog}: {path}: No such file or directory\n"


def _inputs(sb: Sandbox, prog: str, files: list[str], stdin: str, env: dict[str, str]) -> tuple[list[str], str, int]:
    """The texts of `files` (stdin when none or `-`), the errors, and the exit code."""
    if not files:
        return [stdin], "", 0
    texts, err, code = [], "", 0
    for f in files:
        if f == "-":
            texts.append(stdin)
            continue
        path = _abs(sb, f, env)
        text = sb.fs.read(path)
        if text is None:
            if sb.fs.is_dir(path):
                err += f"{prog}: read error: Is a directory\n" if _busybox(sb) else f"{prog}: {f}: Is a directory\n"
            else:
                err += _no_file(sb, prog, f)
            code = 1
            continue
        texts.append(text)
    return texts, err, code


def _lines(text: str) -> list[str]:
    return text.splitlines()


def _join(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


# -- files ----------------------------------------------------------------------------------------
@tool("cat")
def cat(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    _, _, files = _flags(argv)
    texts, err, code = _inputs(sb, "cat", files, stdin, env)
    return code, "".join(texts), err


@tool("ls")
def ls(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    flags, _, paths = _flags(argv)
    paths = paths or [env.get("PWD", "/")]
    out, err, code = [], "", 0
    long = "l" in flags
    show_all = "a" in flags or "A" in flags
    many = len(paths) > 1
    files_first = [p for p in paths if not sb.fs.is_dir(_abs(sb, p, env))]
    for p in files_first:
        path = _abs(sb, p, env)
        if sb.fs.read(path) is None:
            err += (f"ls: {p}: No such file or directory\n" if _busybox(sb)
                    else f"ls: cannot access '{p}': No such file or directory\n")
            code = 2 if not _busybox(sb) else 1
            continue
        out.append(_ls_entry(sb, path, p, long))
    for p in [p for p in paths if p not in files_first]:
        path = _abs(sb, p, env)
        names = sb.fs.listdir(path)
        if not show_all:
            names = [n for n in names if not n.startswith(".")]
        elif "a" in flags:
            names = [".", ".."] + names
        if many:
            out.append(("" if out else "") + f"{p}:")
        if long:
            out.append(f"total {4 * len(names)}")
            out += [_ls_entry(sb, f"{path.rstrip('/')}/{n}", n, True) for n in names]
        else:
            out += names
        if many:
            out.append("")
    if out and out[-1] == "":
        out.pop()
    return code, _join(out), err


def _ls_entry(sb: Sandbox, path: str, name: str, long: bool) -> str:
    if not long:
        return name
    is_dir = sb.fs.is_dir(path)
    text = sb.fs.read(path) or ""
    stamp = datetime.fromtimestamp(sb.c.started_at or sb.now, UTC).strftime("%b %e %H:%M")
    mode = "drwxr-xr-x" if is_dir else ("-rwxr-xr-x" if "/bin/" in path else "-rw-r--r--")
    size = 4096 if is_dir else len(text.encode())
    links = 2 if is_dir else 1
    if _busybox(sb):
        return f"{mode}    {links} root     root      {size:>8} {stamp} {name}"
    return f"{mode} {links} root root {size:>5} {stamp} {name}"


@tool("head", "tail")
def head_tail(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    prog = argv[0].rsplit("/", 1)[-1]
    args = [("-n" + a[1:]) if re.fullmatch(r"-\d+", a) else a for a in argv]
    flags, values, files = _flags(args, "nc")
    n_text = values.get("n", "10")
    texts, err, code = _inputs(sb, prog, files, stdin, env)
    out = ""
    for text in texts:
        if "c" in values and values["c"].isdigit():
            n = int(values["c"])
            out += text[:n] if prog == "head" else (text[-n:] if n else "")
            continue
        lines = _lines(text)
        if prog == "head":
            n = int(n_text) if n_text.lstrip("-").isdigit() else 10
            picked = lines[:n] if n >= 0 else lines[:n]
        else:
            if n_text.startswith("+"):
                picked = lines[int(n_text[1:]) - 1:]
            else:
                n = int(n_text.lstrip("-")) if n_text.lstrip("-").isdigit() else 10
                picked = lines[-n:] if n else []
        out += _join(picked)
    del flags
    return code, out, err


@tool("wc")
def wc(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    flags, _, files = _flags(argv)
    texts, err, code = _inputs(sb, "wc", files, stdin, env)
    out = []
    for k, text in enumerate(texts):
        counts = {"l": text.count("\n"), "w": len(text.split()), "c": len(text.encode())}
        picked = [counts[f] for f in "lwc" if f in flags] or [counts["l"], counts["w"], counts["c"]]
        width = 7 if len(picked) > 1 else 0
        line = " ".join(f"{v:>{width}}" for v in picked)
        if files:
            line += f" {files[k]}"
        out.append(line)
    return code, _join(out), err


@tool("grep", "egrep")
def grep(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    flags, values, rest = _flags(argv, "ef")
    pattern = values.get("e")
    if pattern is None:
        if not rest:
            return 2, "", ("Usage: grep [-HhnlLoqvsrRiwFE] [-m N] [-A|B|C N] PATTERN/-e PATTERN.../-f FILE [FILE]...\n"
                           if _busybox(sb) else "Usage: grep [OPTION]... PATTERNS [FILE]...\n")
        pattern, rest = rest[0], rest[1:]
    if "F" in flags:
        regex = re.escape(pattern)
    else:
        regex = pattern if ("E" in flags or argv[0].endswith("egrep")) else _bre(pattern)
    if "w" in flags:
        regex = rf"\b(?:{regex})\b"
    try:
        rx = re.compile(regex, re.I if "i" in flags else 0)
    except re.error:
        return 2, "", f"grep: bad regex '{pattern}'\n"
    files = rest
    texts, err, code = _inputs(sb, "grep", files, stdin, env)
    out, matched = [], False
    for k, text in enumerate(texts):
        prefix = f"{files[k]}:" if len(files) > 1 and "h" not in flags else ""
        count = 0
        for num, line in enumerate(_lines(text), 1):
            hit = bool(rx.search(line)) != ("v" in flags)
            if not hit:
                continue
            matched = True
            count += 1
            if "q" in flags:
                return 0, "", ""
            if "c" in flags or "l" in flags:
                continue
            if "o" in flags and "v" not in flags:
                out += [prefix + m.group(0) for m in rx.finditer(line)]
            else:
                out.append(prefix + (f"{num}:" if "n" in flags else "") + line)
        if "c" in flags:
            out.append(prefix + str(count))
        if "l" in flags and count:
            out.append(files[k] if files else "(standard input)")
    if code and "s" in flags:
        err = ""
    return (code if code and not matched else 0 if matched else 1), _join(out), err


def _bre(pattern: str) -> str:
    """A basic regular expression in Python's syntax: \\| \\( \\) \\{ \\} are the operators, bare ones literal."""
    out, i = "", 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            out += nxt if nxt in "|(){}+?" else "\\" + nxt
            i += 2
            continue
        out += "\\" + ch if ch in "|(){}+?" else ch
        i += 1
    return out


@tool("sort")
def sort(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    flags, values, files = _flags(argv, "kt")
    texts, err, code = _inputs(sb, "sort", files, stdin, env)
    lines = [line for t in texts for line in _lines(t)]
    key_field = values.get("k", "")
    sep = values.get("t")

    def key(line: str) -> Any:
        text = line
        if key_field:
            idx = int(key_field.split(",")[0].rstrip("nr")) - 1
            parts = line.split(sep) if sep else line.split()
            text = parts[idx] if idx < len(parts) else ""
        if "n" in flags or key_field.endswith("n"):
            m = re.match(r"\s*-?\d+(\.\d+)?", text)
            return float(m.group(0)) if m else 0.0
        return text
    lines.sort(key=key, reverse="r" in flags)
    if "u" in flags:
        lines = list(dict.fromkeys(lines))
    return code, _join(lines), err


@tool("uniq")
def uniq(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    flags, _, files = _flags(argv)
    texts, err, code = _inputs(sb, "uniq", files[:1], stdin, env)
    out: list[tuple[str, int]] = []
    for line in _lines("".join(texts)):
        if out and out[-1][0] == line:
            out[-1] = (line, out[-1][1] + 1)
        else:
            out.append((line, 1))
    if "c" in flags:
        return code, _join([f"{n:>7} {line}" for line, n in out]), err
    if "d" in flags:
        out = [(line, n) for line, n in out if n > 1]
    return code, _join([line for line, _ in out]), err


@tool("cut")
def cut(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    _, values, files = _flags(argv, "dfc")
    texts, err, code = _inputs(sb, "cut", files, stdin, env)
    spec = values.get("f") or values.get("c") or ""
    if not spec:
        return 1, "", "cut: you must specify a list of bytes, characters, or fields\n"
    picks: list[tuple[int, int]] = []
    for part in spec.split(","):
        a, dash, b = part.partition("-")
        picks.append((int(a or 1), int(b) if b else (10**6 if dash else int(a or 1))))
    delim = values.get("d", "\t")
    out = []
    for line in _lines("".join(texts)):
        if "c" in values:
            out.append("".join(line[lo - 1:hi] for lo, hi in picks))
            continue
        if delim not in line:
            out.append(line)
            continue
        fields = line.split(delim)
        chosen = [fields[k - 1] for lo, hi in picks for k in range(lo, min(hi, len(fields)) + 1)]
        out.append(delim.join(chosen))
    return code, _join(out), err


@tool("tr")
def tr(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    flags, _, sets = _flags(argv)

    def expand(s: str) -> str:
        s = s.replace("[:upper:]", "A-Z").replace("[:lower:]", "a-z").replace("[:digit:]", "0-9").replace("[:space:]", " \t\n")
        s = s.replace("\\n", "\n").replace("\\t", "\t")
        out, i = "", 0
        while i < len(s):
            if i + 2 < len(s) and s[i + 1] == "-":
                out += "".join(chr(c) for c in range(ord(s[i]), ord(s[i + 2]) + 1))
                i += 3
            else:
                out += s[i]
                i += 1
        return out
    if not sets:
        return 1, "", "tr: missing operand\n"
    a = expand(sets[0])
    if "d" in flags:
        return 0, "".join(ch for ch in stdin if ch not in a), ""
    if "s" in flags and len(sets) == 1:
        return 0, re.sub("([" + re.escape(a) + "])\\1+", r"\1", stdin), ""
    b = expand(sets[1]) if len(sets) > 1 else ""
    b = (b + b[-1:] * len(a))[:len(a)] if b else a
    return 0, stdin.translate(str.maketrans(a, b)), ""


@tool("sed")
def sed(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    flags, values, rest = _flags(argv, "e")
    script = values.get("e")
    if script is None:
        if not rest:
            return 1, "", "Usage: sed [-efinrsE] SED_CMD [FILE]...\n"
        script, rest = rest[0], rest[1:]
    texts, err, code = _inputs(sb, "sed", rest, stdin, env)
    lines = _lines("".join(texts))
    out: list[str] = []
    for cmd in [c.strip() for c in script.split(";") if c.strip()]:
        m = re.fullmatch(r"s(.)(.*?)\1(.*?)\1([gip0-9]*)", cmd, re.S)
        n = re.fullmatch(r"(\d+)?(,(\d+|\$))?([pd])", cmd)
        if m:
            pat = m.group(2) if "E" in flags or "r" in flags else _bre(m.group(2))
            repl = re.sub(r"\\(\d)", r"\\\1", m.group(3)).replace("&", r"\g<0>")
            count = 0 if "g" in m.group(4) else 1
            rx = re.compile(pat, re.I if "i" in m.group(4) else 0)
            lines = [rx.sub(repl, line, count=count) for line in lines]
        elif n:
            lo = int(n.group(1) or 1)
            hi_text = n.group(3)
            hi = len(lines) if hi_text == "$" else int(hi_text) if hi_text else (lo if n.group(1) else len(lines))
            if n.group(4) == "d":
                lines = [line for k, line in enumerate(lines, 1) if not lo <= k <= hi]
            else:
                out += [line for k, line in enumerate(lines, 1) if lo <= k <= hi]
                if "n" in flags:
                    lines = []
        else:
            return 1, "", f"sed: unsupported command {cmd}\n"
    return code, _join(out + ([] if "n" in flags else lines)), err


@tool("awk", "mawk")
def awk(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    """The one-liners awk is typed for: `{print $1, $3}` with -F, and a /regex/ filter."""
    _, values, rest = _flags(argv, "Fv")
    if not rest:
        return 2, "", "usage: awk [-F fs][-v var=value][prog | -f progfile][file ...]\n"
    prog, files = rest[0].strip(), rest[1:]
    texts, err, code = _inputs(sb, "awk", files, stdin, env)
    m = re.fullmatch(r"(?:/(.*?)/\s*)?(?:\{\s*print\s*(.*?)\s*;?\s*\})?", prog, re.S)
    if not m or (m.group(1) is None and m.group(2) is None):
        return 2, "", f"awk: unsupported program: {prog}\n"
    rx = re.compile(m.group(1)) if m.group(1) is not None else None
    items = [p.strip() for p in re.split(r",", m.group(2))] if m.group(2) else ["$0"]
    sep = values.get("F")
    out = []
    for nr, line in enumerate(_lines("".join(texts)), 1):
        if rx is not None and not rx.search(line):
            continue
        fields = line.split(sep) if sep else line.split()
        vals = []
        for item in items:
            text = ""
            for tok in re.findall(r'"[^"]*"|\$\w+|NF|NR|\S+', item):
                if tok.startswith('"'):
                    text += tok[1:-1]
                elif tok == "$0":
                    text += line
                elif tok == "$NF":
                    text += fields[-1] if fields else ""
                elif tok.startswith("$") and tok[1:].isdigit():
                    k = int(tok[1:])
                    text += fields[k - 1] if 0 < k <= len(fields) else ""
                elif tok == "NF":
                    text += str(len(fields))
                elif tok == "NR":
                    text += str(nr)
                else:
                    text += tok
            vals.append(text)
        out.append(" ".join(vals))
    return code, _join(out), err


@tool("tee")
def tee(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    flags, _, files = _flags(argv)
    err = ""
    for f in files:
        msg = sb.fs.write_checked(_abs(sb, f, env), stdin, "a" in flags)
        if msg:
            err += f"tee: {f}: {msg}\n"
    return (1 if err else 0), stdin, err


@tool("touch", "mkdir")
def touch(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    prog = argv[0].rsplit("/", 1)[-1]
    _, _, paths = _flags(argv)
    err = ""
    for p in paths:
        path = _abs(sb, p, env)
        if prog == "mkdir":
            if any(path.startswith(r) for r in ("/proc/", "/sys/")):
                err += f"mkdir: cannot create directory '{p}': Read-only file system\n"
            else:
                sb.fs.dirs.add(path.rstrip("/") or "/")
            continue
        if sb.fs.read(path) is None:
            msg = sb.fs.write_checked(path, "")
            if msg:
                err += f"touch: {p}: {msg}\n" if _busybox(sb) else f"touch: cannot touch '{p}': {msg}\n"
    return (1 if err else 0), "", err


@tool("rm")
def rm(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    flags, _, paths = _flags(argv)
    err = ""
    for p in paths:
        path = _abs(sb, p, env)
        if path.startswith(("/proc/", "/sys/")) or any(path.startswith(m.rstrip("/") + "/") for m in sb.fs.read_only_mounts):
            err += f"rm: can't remove '{p}': Read-only file system\n"
        elif not sb.fs.remove(path) and "f" not in flags:
            err += f"rm: can't remove '{p}': No such file or directory\n"
    return (1 if err else 0), "", err


@tool("stat")
def stat(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    _, _, paths = _flags(argv)
    out, err = "", ""
    for p in paths:
        path = _abs(sb, p, env)
        if not sb.fs.exists(path):
            err += f"stat: can't stat '{p}': No such file or directory\n"
            continue
        size = 4096 if sb.fs.is_dir(path) else len((sb.fs.read(path) or "").encode())
        kind = "directory" if sb.fs.is_dir(path) else "regular file"
        out += f"  File: {p}\n  Size: {size}\t\tBlocks: {(size + 511) // 512}\tIO Block: 4096\t{kind}\n"
    return (1 if err else 0), out, err


@tool("du")
def du(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    _, _, paths = _flags(argv)
    out = []
    for p in paths or ["."]:
        path = _abs(sb, p, env)
        total = sum(len((sb.fs.read(f) or "").encode()) for f in list(sb.fs.files) + list(sb.fs.written)
                    if f == path or f.startswith(path.rstrip("/") + "/"))
        out.append(f"{max(4, (total + 1023) // 1024)}\t{p}")
    return 0, _join(out), ""


@tool("base64")
def b64(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    flags, _, files = _flags(argv)
    texts, err, code = _inputs(sb, "base64", files, stdin, env)
    data = "".join(texts)
    if "d" in flags or "decode" in flags:
        try:
            return code, base64.b64decode("".join(data.split())).decode(errors="replace"), err
        except ValueError:
            return 1, "", "base64: invalid input\n"
    enc = base64.b64encode(data.encode()).decode()
    return code, _join([enc[i:i + 76] for i in range(0, len(enc), 76)]), err


@tool("basename", "dirname")
def basename(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    if len(argv) < 2:
        return 1, "", f"{argv[0]}: missing operand\n"
    path = argv[1].rstrip("/") or "/"
    if argv[0].endswith("dirname"):
        return 0, (path.rsplit("/", 1)[0] or "/" if "/" in path else ".") + "\n", ""
    name = path.rsplit("/", 1)[-1]
    if len(argv) > 2 and name.endswith(argv[2]):
        name = name[:-len(argv[2])]
    return 0, name + "\n", ""


@tool("xargs")
def xargs(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    cmd = argv[1:] or ["echo"]
    return sb.run_argv(_subshell(sb, env), cmd + stdin.split(), "", env)


def _subshell(sb: Sandbox, env: dict[str, str]):  # type: ignore[no-untyped-def]
    from kubesim.userland.shell import Shell
    sh = Shell(env, sb.run_argv, sb.glob, "sh", ["sh"], "ash" if _busybox(sb) else "dash", sb.budget)
    sh.files = sb.fs
    return sh


# -- text and the environment -----------------------------------------------------------------------
@tool("echo")
def echo(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    args = argv[1:]
    newline, escapes = True, False
    while args and re.fullmatch(r"-[neE]+", args[0]):
        newline = newline and "n" not in args[0]
        escapes = "e" in args[0]
        args = args[1:]
    text = " ".join(args)
    if escapes:
        text = text.encode().decode("unicode_escape", errors="replace")
    return 0, text + ("\n" if newline else ""), ""


@tool("printf")
def printf(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    if len(argv) < 2:
        return 1, "", "printf: usage: printf format [arguments]\n"
    fmt, args = argv[1], argv[2:]
    fmt = fmt.replace("\\n", "\n").replace("\\t", "\t")
    specs = re.findall(r"%[-0-9.]*[sdfx%]", fmt)
    n = len([s for s in specs if s != "%%"]) or 1
    out = ""
    chunks = [args[i:i + n] for i in range(0, len(args), n)] or [[]]
    for chunk in chunks:
        vals = iter(chunk)

        def fill(m: re.Match[str], vals: Iterator[str] = vals) -> str:
            spec = m.group(0)
            if spec == "%%":
                return "%"
            v = next(vals, "")
            try:
                return spec % (int(v or 0) if spec[-1] in "dx" else float(v or 0) if spec[-1] == "f" else v)
            except (ValueError, TypeError):
                return v
        out += re.sub(r"%[-0-9.]*[sdfx%]", fill, fmt)
    return 0, out, ""


@tool("env", "printenv")
def env_tool(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    prog = argv[0].rsplit("/", 1)[-1]
    if prog == "printenv" and len(argv) > 1:
        vals = [env[k] for k in argv[1:] if k in env]
        return (0 if len(vals) == len(argv) - 1 else 1), _join(vals), ""
    args = argv[1:]
    env = dict(env)
    while args and ("=" in args[0] or args[0] in ("-i", "-")):
        if args[0] in ("-i", "-"):
            env = {}
        else:
            k, _, v = args[0].partition("=")
            env[k] = v
        args = args[1:]
    if args:
        return sb.run_argv(_subshell(sb, env), args, stdin, env)
    return 0, "".join(f"{k}={v}\n" for k, v in env.items()), ""


@tool("true")
def true(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    return 0, "", ""


@tool("false")
def false(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    return 1, "", ""


@tool("sleep")
def sleep(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    # The exec returns at once: the emulated cluster's clock is not the exec's to hold.
    if len(argv) < 2 or not re.fullmatch(r"[\d.]+[smhd]?|infinity", argv[1]):
        return 1, "", f"sleep: invalid number '{argv[1] if len(argv) > 1 else ''}'\n"
    return 0, "", ""


@tool("test", "[")
def test(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    args = argv[1:]
    if argv[0] == "[":
        if not args or args[-1] != "]":
            return 2, "", "[: missing ]\n"
        args = args[:-1]
    negate = False
    if args and args[0] == "!":
        negate, args = True, args[1:]
    ok = _test(sb, args, env)
    return (0 if ok != negate else 1), "", ""


def _test(sb: Sandbox, args: list[str], env: dict[str, str]) -> bool:
    if not args:
        return False
    if len(args) == 1:
        return args[0] != ""
    if len(args) == 2:
        op, v = args
        path = _abs(sb, v, env)
        return {"-n": v != "", "-z": v == "", "-e": sb.fs.exists(path), "-f": sb.fs.read(path) is not None,
                "-d": sb.fs.is_dir(path), "-s": bool(sb.fs.read(path)), "-r": sb.fs.exists(path),
                "-x": sb.fs.read(path) is not None and "/bin/" in path}.get(op, False)
    a, op, b = args[0], args[1], args[2]
    if op in ("=", "=="):
        return a == b
    if op == "!=":
        return a != b
    try:
        x, y = int(a), int(b)
    except ValueError:
        return False
    return {"-eq": x == y, "-ne": x != y, "-lt": x < y, "-le": x <= y, "-gt": x > y, "-ge": x >= y}.get(op, False)


@tool("seq")
def seq(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    nums = [int(a) for a in argv[1:] if a.lstrip("-").isdigit()]
    if not nums:
        return 1, "", "seq: missing operand\n"
    lo, step, hi = (1, 1, nums[0]) if len(nums) == 1 else (nums[0], 1, nums[1]) if len(nums) == 2 else tuple(nums[:3])
    if not step:
        return 1, "", "seq: invalid Zero increment value: '0'\n"
    return 0, _join([str(i) for i in itertools.islice(range(lo, hi + (1 if step > 0 else -1), step), 100_000)]), ""


@tool("which")
def which(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    out, code = [], 0
    for name in argv[1:]:
        if sb.land.resolve(name) is None:
            code = 1
        else:
            out.append(sb.where(name))
    return code, _join(out), ""


@tool("id", "whoami")
def ident(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    sc = {**((sb.ctx.pod.get("spec") or {}).get("securityContext") or {}), **(sb.ctx.container.get("securityContext") or {})}
    uid = int(sc.get("runAsUser", 0))
    gid = int(sc.get("runAsGroup", uid if uid else 0))
    names = {0: "root", 65534: "nobody", 999: "redis" if "redis" in sb.c.image else "999"}
    user = names.get(uid, str(uid))
    if argv[0].endswith("whoami"):
        if user == str(uid):
            return 1, "", f"whoami: unknown uid {uid}\n" if _busybox(sb) else f"whoami: cannot find name for user ID {uid}\n"
        return 0, user + "\n", ""
    groups = [gid] + [int(g) for g in sc.get("supplementalGroups") or []]
    gname = names.get(gid, str(gid))
    return 0, (f"uid={uid}({user}) gid={gid}({gname}) groups=" + ",".join(f"{g}({names.get(g, g)})" for g in groups)
               ).replace(f"({uid})", "") + "\n", ""


@tool("hostname")
def hostname(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    flags, _, _ = _flags(argv)
    if "i" in flags:
        return 0, sb.rt.ip + "\n", ""
    from kubesim.userland.fs import hostname_of
    return 0, hostname_of(sb.ctx.pod) + "\n", ""


@tool("uname")
def uname(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    flags, _, _ = _flags(argv)
    from kubesim.userland.fs import hostname_of
    parts = {"s": "Linux", "n": hostname_of(sb.ctx.pod), "r": "6.8.0-1021-aws", "v": "#23-Ubuntu SMP Mon Dec  9 23:59:34 UTC 2024",
             "m": "x86_64", "o": "GNU/Linux"}
    if "a" in flags:
        return 0, " ".join(parts[k] for k in "snrvmo") + "\n", ""
    keys = [k for k in "snrvmo" if k in flags] or ["s"]
    return 0, " ".join(parts[k] for k in keys) + "\n", ""


@tool("date")
def date(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    flags, values, rest = _flags(argv, "d")
    t = sb.ctx.app_time()
    fmt = next((a[1:] for a in rest if a.startswith("+")), None)
    operand = next((a for a in rest if not a.startswith("+")), None)
    if operand is not None:
        # an operand sets the clock ([MMDDhhmm[[CC]YY][.ss]]), which a container may not do
        if operand.replace(".", "").isdigit():
            return 1, "", "date: cannot set date: Operation not permitted\n"
        return 1, "", f"date: invalid date '{operand}'\n"
    stamp = datetime.fromtimestamp(t, UTC)
    if fmt is not None:
        fmt = fmt.replace("%N", f"{int((t % 1) * 1e9):09d}").replace("%s", str(int(t)))
        return 0, stamp.strftime(fmt) + "\n", ""
    if "I" in flags or "iso-8601" in flags:
        return 0, stamp.strftime("%Y-%m-%dT%H:%M:%S+00:00") + "\n", ""
    if "R" in flags:
        return 0, stamp.strftime("%a, %d %b %Y %H:%M:%S +0000") + "\n", ""
    return 0, stamp.strftime("%a %b %e %H:%M:%S UTC %Y") + "\n", ""


@tool("kill")
def kill(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    _, _, rest = _flags(argv)
    pids = [a for a in rest if a.isdigit()]
    if not pids:
        return 1, "", "kill: usage: kill [-s sigspec | -n signum | -sigspec] pid | jobspec ... or kill -l [sigspec]\n"
    for pid in pids:
        if pid == "1":
            # PID 1 ignores signals it has no handler for; a TERM or KILL from inside the
            # container's own namespace is what `kill 1` does to the main process.
            sig = next((a for a in argv[1:] if a.startswith("-")), "-TERM")
            if sig.lstrip("-") in ("9", "KILL", "15", "TERM", "2", "INT"):
                sb.cluster.kubelet.terminate(sb.rt.namespace, sb.rt.name, sb.c.name, 137 if sig.lstrip("-") in ("9", "KILL") else 143)
            continue
        if not any(str(p.pid) == pid for p in sb.procs):
            return 1, "", f"kill: can't kill pid {pid}: No such process\n"
    return 0, "", ""


# -- processes and resources ---------------------------------------------------------------------
def _cmdline(argv: list[str]) -> str:
    return " ".join(argv)


@tool("ps")
def ps(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    procs = sb.procs + [type(sb.procs[0])(sb.next_pid + 2, list(argv), 0.0, 0.0, sb.now)]
    if _busybox(sb):
        out = ["PID   USER     TIME  COMMAND"]
        for p in procs:
            out.append(f"{p.pid:>5} root      {int(p.cpu) // 60}:{int(p.cpu) % 60:02d} {_cmdline(p.argv)}")
        return 0, _join(out), ""
    args = "".join(a.lstrip("-") for a in argv[1:])
    start = datetime.fromtimestamp(sb.c.started_at or sb.now, UTC).strftime("%H:%M")
    node = sb.cluster.nodes.get(sb.rt.node)
    total = node.memory if node else 16 * 2**30
    if "aux" in args or args in ("ax", "aux", "auxww", "auxf"):
        out = ["USER         PID %CPU %MEM    VSZ   RSS TTY      STAT START   TIME COMMAND"]
        for p in procs:
            rss = int(p.rss // 1024) if p.rss else 3500
            age = max(1.0, sb.now - (p.start or sb.now))
            cpu = 100.0 * p.cpu / age if p.pid == 1 else 0.0
            out.append(f"root     {p.pid:>7} {cpu:>4.1f} {100.0 * rss * 1024 / total:>4.1f} {rss * 3:>6} {rss:>5} ?        "
                       f"{'Ssl' if p.pid == 1 else 'Rs'}  {start}   {int(p.cpu) // 60}:{int(p.cpu) % 60:02d} {_cmdline(p.argv)}")
        return 0, _join(out), ""
    if "e" in args or "f" in args:
        out = ["UID          PID    PPID  C STIME TTY          TIME CMD"]
        for p in procs:
            c = int(p.cpu)
            out.append(f"root     {p.pid:>7} {0 if p.pid == 1 else 1:>7}  0 {start} ?        "
                       f"{c // 3600:02d}:{c // 60 % 60:02d}:{c % 60:02d} {_cmdline(p.argv)}")
        return 0, _join(out), ""
    out = ["    PID TTY          TIME CMD"]
    for p in procs:
        c = int(p.cpu)
        out.append(f"{p.pid:>7} ?        {c // 3600:02d}:{c // 60 % 60:02d}:{c % 60:02d} {p.argv[0].rsplit('/', 1)[-1][:15]}")
    return 0, _join(out), ""


def _memory(sb: Sandbox) -> tuple[int, int, int, int]:
    """(total, used, free, buff/cache) in KiB, of the node: a container's free shows the host's."""
    node = sb.cluster.nodes.get(sb.rt.node)
    total = int((node.memory if node else 16 * 2**30) // 1024)
    used = int(sum(c.memory for r in sb.cluster.kubelet.state["pods"].values() if r.node == sb.rt.node
                   for c in r.containers.values() if c.state == "running") // 1024) + total // 12
    cache = total // 5
    return total, min(used, total), max(0, total - used - cache), cache


@tool("free")
def free(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    flags, _, _ = _flags(argv)
    total, used, free_, cache = _memory(sb)
    div = 1024 if "m" in flags else 1024 * 1024 if "g" in flags else 1
    vals = [v // div for v in (total, used, free_, 1024, cache, free_ + cache)]
    if _busybox(sb):
        return 0, (f"              total        used        free      shared  buff/cache   available\n"
                   f"Mem:   {vals[0]:>12} {vals[1]:>11} {vals[2]:>11} {vals[3]:>11} {vals[4]:>11} {vals[5]:>11}\n"
                   f"Swap:  {0:>12} {0:>11} {0:>11}\n"), ""
    return 0, (f"               total        used        free      shared  buff/cache   available\n"
               f"Mem:    {vals[0]:>12} {vals[1]:>11} {vals[2]:>11} {vals[3]:>11} {vals[4]:>11} {vals[5]:>11}\n"
               f"Swap:   {0:>12} {0:>11} {0:>11}\n"), ""


@tool("uptime")
def uptime(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    t = datetime.fromtimestamp(sb.ctx.app_time(), UTC).strftime("%H:%M:%S")
    load = _load(sb)
    return 0, f" {t} up 3 days,  4:12,  0 users,  load average: {load:.2f}, {load:.2f}, {load:.2f}\n", ""


def _load(sb: Sandbox) -> float:
    node = sb.cluster.nodes.get(sb.rt.node)
    busy = sum(1 for r in sb.cluster.kubelet.state["pods"].values() if r.node == sb.rt.node)
    return round(0.05 * busy * (node.cpu / 4.0 if node else 1.0), 2)


@tool("top")
def top(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    total, used, free_, cache = _memory(sb)
    load = _load(sb)
    procs = sb.procs + [type(sb.procs[0])(sb.next_pid + 2, list(argv), 0.0, 0.0, sb.now)]
    if _busybox(sb):
        out = [f"Mem: {used}K used, {free_}K free, 1024K shrd, 0K buff, {cache}K cached",
               "CPU:   2% usr   1% sys   0% nic  96% idle   0% io   0% irq   0% sirq",
               f"Load average: {load:.2f} {load:.2f} {load:.2f} 1/{len(procs) + 300} {procs[-1].pid}",
               "  PID  PPID USER     STAT   VSZ %VSZ CPU %CPU COMMAND"]
        for p in procs:
            vsz = int(p.rss // 1024 * 3) if p.rss else 1600
            out.append(f"{p.pid:>5} {0 if p.pid == 1 else 1:>5} root     {'S' if p.pid == 1 else 'R'}    {vsz:>6}   0%   1   0% "
                       f"{_cmdline(p.argv)}")
        return 0, _join(out), ""
    t = datetime.fromtimestamp(sb.ctx.app_time(), UTC).strftime("%H:%M:%S")
    mib = [v / 1024 for v in (total, free_, used, cache)]
    out = [f"top - {t} up 3 days,  4:12,  0 users,  load average: {load:.2f}, {load:.2f}, {load:.2f}",
           f"Tasks: {len(procs):>3} total,   1 running, {len(procs) - 1:>3} sleeping,   0 stopped,   0 zombie",
           "%Cpu(s):  2.0 us,  1.0 sy,  0.0 ni, 96.5 id,  0.0 wa,  0.0 hi,  0.5 si,  0.0 st",
           f"MiB Mem : {mib[0]:>8.1f} total, {mib[1]:>8.1f} free, {mib[2]:>8.1f} used, {mib[3]:>8.1f} buff/cache",
           f"MiB Swap:      0.0 total,      0.0 free,      0.0 used. {mib[1] + mib[3]:>8.1f} avail Mem", "",
           "    PID USER      PR  NI    VIRT    RES    SHR S  %CPU  %MEM     TIME+ COMMAND"]
    for p in procs:
        res = int(p.rss // 1024) if p.rss else 3500
        c = p.cpu
        out.append(f"{p.pid:>7} root      20   0 {res * 3:>7} {res:>6} {res // 8:>6} {'S' if p.pid == 1 else 'R'} "
                   f"{0.0:>5.1f} {100.0 * res / total:>5.1f} {int(c // 60):>3}:{c % 60:05.2f} {p.argv[0].rsplit('/', 1)[-1]}")
    return 0, _join(out), ""


# df's columns as busybox and coreutils print them, by (busybox, -h): the header and the widths of
# the filesystem name and of the size, used and available counts.
_DF_LAYOUTS = {
    (True, False): ("Filesystem           1K-blocks      Used Available Use% Mounted on", 20, 9, 9, 9),
    (True, True): ("Filesystem                Size      Used Available Use% Mounted on", 20, 9, 9, 9),
    (False, False): ("Filesystem     1K-blocks     Used Available Use% Mounted on", 14, 9, 8, 9),
    (False, True): ("Filesystem      Size  Used Avail Use% Mounted on", 15, 4, 5, 5),
}


@tool("df")
def df(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    flags, _, _ = _flags(argv)
    node = sb.cluster.nodes.get(sb.rt.node)
    disk = node.disks[0] if node else None
    size = int((disk.size_bytes if disk else 100 * 2**30) // 1024)
    full = float(sb.cluster.nodes.fault(sb.rt.node, "diskFullPercent") or 0.0)
    used = int(size * full / 100) if full else int((disk.used_bytes if disk else 20 * 2**30) // 1024)
    total_mem, _, _, _ = _memory(sb)
    rows = [("overlay", size, used, "/"), ("tmpfs", 65536, 0, "/dev")]
    mounts = sb.ctx.container.get("volumeMounts") or []
    if not any(m.get("mountPath", "").rstrip("/") == SHM_PATH for m in mounts):
        shm = landing(sb.ctx, SHM_PATH)
        rows.append(("shm", int(shm.capacity // 1024), int(shm.used // 1024), SHM_PATH))
    rows.append(("/dev/nvme0n1p1", size, used, "/etc/hosts"))
    for m in mounts:
        land = landing(sb.ctx, m.get("mountPath", ""))
        if land.backing == "memory":
            rows.append(("tmpfs", int(land.capacity // 1024), int(land.used // 1024), land.mount))
            continue
        rows.append(("tmpfs" if m.get("readOnly") or "secret" in m.get("name", "") else "/dev/nvme0n1p1",
                     total_mem if m.get("readOnly") else size, 4 if m.get("readOnly") else used, m.get("mountPath", "")))
    if sb.fs.read("/var/run/secrets/kubernetes.io/serviceaccount/token") is not None:
        rows.append(("tmpfs", total_mem, 12, "/var/run/secrets/kubernetes.io/serviceaccount"))

    def human(kib: int) -> str:
        for unit, div in (("T", 2**30), ("G", 2**20), ("M", 2**10)):
            if kib >= div:
                return f"{kib / div:.1f}{unit}"
        return f"{kib}K"
    header, w_name, w_size, w_used, w_avail = _DF_LAYOUTS[_busybox(sb), "h" in flags]
    show = human if "h" in flags else str
    out = [header]
    for name, tot, u, mnt in rows:
        pct = f"{(100 * u + tot - 1) // tot if tot else 0}%"
        out.append(f"{name:<{w_name}} {show(tot):>{w_size}} {show(u):>{w_used}} {show(tot - u):>{w_avail}} {pct:>4} {mnt}")
    return 0, _join(out), ""


@tool("mount")
def mount(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    out = ["overlay on / type overlay (rw,relatime,lowerdir=/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/"
           "snapshots/41/fs,upperdir=/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots/42/fs)",
           "proc on /proc type proc (rw,nosuid,nodev,noexec,relatime)",
           "tmpfs on /dev type tmpfs (rw,nosuid,size=65536k,mode=755)"]
    mounts = sb.ctx.container.get("volumeMounts") or []
    if not any(m.get("mountPath", "").rstrip("/") == SHM_PATH for m in mounts):
        out.append("shm on /dev/shm type tmpfs (rw,nosuid,nodev,noexec,relatime,size=65536k)")
    for m in mounts:
        land = landing(sb.ctx, m.get("mountPath", ""))
        if land.backing == "memory":
            out.append(f"tmpfs on {land.mount} type tmpfs (rw,relatime,size={int(land.capacity // 1024)}k)")
            continue
        out.append(f"/dev/nvme0n1p1 on {m.get('mountPath', '')} type ext4 ({'ro' if m.get('readOnly') else 'rw'},relatime)")
    return 0, _join(out), ""


@tool("netstat")
def netstat(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    out = ["Active Internet connections (only servers)",
           "Proto Recv-Q Send-Q Local Address           Foreign Address         State"]
    for c in sb.rt.containers.values():
        for port in sorted(c.ports):
            out.append(f"tcp        0      0 :::{port:<20} :::*                    LISTEN")
    return 0, _join(out), ""


@tool("busybox")
def busybox(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    if len(argv) < 2:
        return 0, "BusyBox v1.36.1 (2023-05-18 22:34:17 UTC) multi-call binary.\n", ""
    return sb.run_argv(_subshell(sb, env), argv[1:], stdin, env)


# -- the network ------------------------------------------------------------------------------------
@tool("nslookup")
def nslookup(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    _, _, rest = _flags(argv)
    if not rest:
        return 1, "", "BusyBox v1.36.1 (2023-05-18 22:34:17 UTC) multi-call binary.\n\nUsage: nslookup [-type=QUERY_TYPE] [-debug] HOST [DNS_SERVER]\n"
    host = rest[0]
    server, _ = sb.cluster.network._resolver(sb.ctx.pod)
    head = f"Server:\t\t{server}\nAddress:\t{server}:53\n\n"
    if not sb.cluster.network._kube_dns_up() and server == net.KUBE_DNS:
        return 1, ";; connection timed out; no servers could be reached\n\n", ""
    ip, name, err = net.lookup(sb.cluster, sb.ctx.pod, host)
    if err or ip is None:
        suffix = "" if "." in host.rstrip(".") and host.count(".") >= 4 else ""
        return 1, head + f"** server can't find {host}{suffix}: NXDOMAIN\n\n", ""
    if ip == host:
        return 0, head + f"Name:\t{host}\nAddress: {ip}\n\n", ""
    return 0, head + f"Name:\t{name}\nAddress: {ip}\n\n", ""


@tool("getent")
def getent(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    if len(argv) < 3 or argv[1] not in ("hosts", "ahosts", "passwd"):
        return 1, "", "Usage: getent [OPTION...] database [key ...]\n"
    if argv[1] == "passwd":
        rows = [line for line in (sb.fs.read("/etc/passwd") or "").splitlines() if line.split(":")[0] == argv[2]]
        return (0 if rows else 2), _join(rows), ""
    ip, name, err = net.lookup(sb.cluster, sb.ctx.pod, argv[2])
    if err or ip is None:
        return 2, "", ""
    return 0, f"{ip:<15} {name}\n", ""


def _url(raw: str) -> tuple[str, str, int, str]:
    if "://" not in raw:
        raw = "http://" + raw
    u = urlsplit(raw)
    port = u.port or (443 if u.scheme == "https" else 80)
    return u.scheme, u.hostname or "", port, (u.path or "/") + (f"?{u.query}" if u.query else "")


@tool("wget")
def wget(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    flags, values, rest = _flags(argv, "OTU")
    urls = [a for a in rest if not a.startswith("-")]
    spider = "spider" in flags
    if not urls:
        return 1, "", "BusyBox v1.36.1 (2023-05-18 22:34:17 UTC) multi-call binary.\n\nUsage: wget [-cqS] [--spider] [-O FILE] URL...\n"
    quiet = "q" in flags
    out_file = values.get("O", "")
    scheme, host, port, target = _url(urls[0])
    err = "" if quiet else f"Connecting to {host}:{port}"
    found = net.dial(sb.cluster, sb.ctx.pod, host, port)
    if found.error:
        if "no such host" in found.error or "lookup" in found.error:
            return 1, "", f"wget: bad address '{host}:{port}'\n" if port not in (80, 443) else f"wget: bad address '{host}'\n"
        err += "" if quiet else f" ({found.ip}:{port})\n"
        if found.timeout:
            return 1, "", err + "wget: download timed out\n"
        return 1, "", err + f"wget: can't connect to remote host ({found.ip or host}): Connection refused\n"
    err += "" if quiet else f" ({found.ip}:{port})\n"
    if scheme == "https":
        return 1, "", err + "wget: error getting response: Connection reset by peer\n"
    answer = net.http_answer(sb.cluster, found, "GET", target)
    if answer.hang:
        return 1, "", err + "wget: download timed out\n"
    if answer.reset:
        return 1, "", err + "wget: error getting response: Connection reset by peer\n"
    if answer.status >= 400:
        return 1, "", err + f"wget: server returned error: HTTP/1.1 {answer.status} {_phrase(answer.status)}\n"
    if spider:
        return 0, "", err + ("" if quiet else "remote file exists\n")
    if out_file in ("-",):
        return 0, answer.body, err
    name = out_file or (target.split("?")[0].rsplit("/", 1)[-1] or "index.html")
    msg = sb.fs.write_checked(_abs(sb, name, env), answer.body)
    if msg:
        return 1, "", err + f"wget: can't open '{name}': {msg}\n"
    return 0, "", err + ("" if quiet else f"saving to '{name}'\n{name}              100% |********************************|"
                                         f" {len(answer.body):>5}  0:00:00 ETA\n'{name}' saved\n")


def _phrase(status: int) -> str:
    from http import HTTPStatus
    return HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else ""


@tool("curl")
def curl(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    flags, values, rest = _flags(argv, "XoHdmwu")
    urls = [a for a in rest if not a.startswith("-")]
    if not urls:
        return 2, "", "curl: try 'curl --help' or 'curl --manual' for more information\n"
    silent = "s" in flags or "silent" in flags
    show_err = "S" in flags or "show-error" in flags
    fail = "f" in flags or "fail" in flags
    include = "i" in flags or "include" in flags
    head = "I" in flags or "head" in flags
    method = values.get("X") or values.get("request") or ("HEAD" if head else "POST" if "d" in values else "GET")
    scheme, host, port, target = _url(urls[0])

    def error(code: int, msg: str) -> Result:
        return code, "", (f"curl: ({code}) {msg}\n" if not silent or show_err else "")
    found = net.dial(sb.cluster, sb.ctx.pod, host, port)
    if found.error:
        if "no such host" in found.error or "lookup" in found.error:
            return error(6, f"Could not resolve host: {host}")
        if found.timeout:
            timeout = values.get("m") or values.get("max-time") or values.get("connect-timeout")
            ms = int(float(timeout) * 1000) if timeout else 134000
            return error(28, f"Failed to connect to {host} port {port} after {ms} ms: Timeout was reached")
        return error(7, f"Failed to connect to {host} port {port} after 1 ms: Couldn't connect to server")
    if scheme == "https":
        return error(35, "OpenSSL/3.0.13: error:0A00010B:SSL routines::wrong version number")
    answer = net.http_answer(sb.cluster, found, method, target)
    if answer.hang:
        timeout = values.get("m") or values.get("max-time")
        ms = int(float(timeout) * 1000) if timeout else 300000
        return error(28, f"Operation timed out after {ms} milliseconds with 0 bytes received")
    if answer.reset:
        return error(52, "Empty reply from server")
    if fail and answer.status >= 400:
        return error(22, f"The requested URL returned error: {answer.status}")
    headers = (f"HTTP/1.1 {answer.status} {_phrase(answer.status)}\r\nContent-Type: {answer.content_type}\r\n"
               f"Date: {datetime.fromtimestamp(sb.ctx.app_time(), UTC).strftime('%a, %d %b %Y %H:%M:%S GMT')}\r\n"
               f"Content-Length: {len(answer.body.encode())}\r\n"
               + "".join(f"{k}: {v}\r\n" for k, v in answer.headers.items()) + "\r\n")
    body = "" if head else answer.body
    text = (headers if include or head else "") + body
    fmt = values.get("w") or values.get("write-out")
    if fmt:
        text += fmt.replace("%{http_code}", str(answer.status)).replace("\\n", "\n")
    out_file = values.get("o") or values.get("output")
    if out_file and out_file != "-":
        if out_file != "/dev/null":
            sb.fs.write_checked(_abs(sb, out_file, env), body)
        return 0, (fmt.replace("%{http_code}", str(answer.status)).replace("\\n", "\n") if fmt else ""), ""
    return 0, text, ""


@tool("nc")
def nc(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    flags, values, rest = _flags(argv, "w")
    if len(rest) < 2 or not rest[1].isdigit():
        return 1, "", "BusyBox v1.36.1 (2023-05-18 22:34:17 UTC) multi-call binary.\n\nUsage: nc [OPTIONS] HOST PORT\n"
    host, port = rest[0], int(rest[1])
    found = net.dial(sb.cluster, sb.ctx.pod, host, port)
    verbose = "v" in flags
    if found.error:
        if "no such host" in found.error or "lookup" in found.error:
            return 1, "", f"nc: bad address '{host}'\n"
        if found.timeout:
            return 1, "", "nc: timed out\n" if values.get("w") else "nc: timed out\n"
        return 1, "", f"nc: {host} ({found.ip}:{port}): Connection refused\n" if verbose else ""
    if "z" in flags:
        return 0, "", f"{host} ({found.ip}:{port}) open\n" if verbose else ""
    if stdin.startswith(("GET ", "HEAD ", "POST ")):
        method, target = stdin.split()[0], stdin.split()[1]
        answer = net.http_answer(sb.cluster, found, method, target)
        return 0, "" if answer.reset else answer.raw().decode(errors="replace"), ""
    return 0, "", ""


@tool("ping")
def ping(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    _, values, rest = _flags(argv, "cWw")
    if not rest:
        return 1, "", "BusyBox v1.36.1 (2023-05-18 22:34:17 UTC) multi-call binary.\n\nUsage: ping [OPTIONS] HOST\n"
    host = rest[0]
    count = int(values.get("c", "4") or 4)
    ip, name, err = net.lookup(sb.cluster, sb.ctx.pod, host)
    if err or ip is None:
        return 1, "", f"ping: bad address '{host}'\n"
    head = f"PING {host} ({ip}): 56 data bytes\n"
    # Service IPs are virtual (kube-proxy answers no ICMP): every echo request is lost.
    svc = any((s.get("spec") or {}).get("clusterIP") == ip for s in sb.cluster.store.iter_raw("services"))
    if svc:
        return 1, head + f"\n--- {host} ping statistics ---\n{count} packets transmitted, 0 packets received, 100% packet loss\n", ""
    lines = "".join(f"64 bytes from {ip}: seq={k} ttl=63 time=0.{80 + k * 7} ms\n" for k in range(count))
    return 0, head + lines + (f"\n--- {host} ping statistics ---\n{count} packets transmitted, {count} packets received, "
                              "0% packet loss\nround-trip min/avg/max = 0.080/0.101/0.122 ms\n"), ""


# -- archives (what `kubectl cp` runs in the container) ----------------------------------------------
@tool("tar")
def tar(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    """`tar cf - PATH...` (kubectl cp from a pod) and `tar xf - [-C DIR]` (kubectl cp to a pod)."""
    import io
    import tarfile
    args = argv[1:]
    mode = args[0].lstrip("-") if args else ""
    rest = args[1:]
    directory = env.get("PWD", "/")
    if "-C" in rest:
        i = rest.index("-C")
        directory = rest[i + 1] if i + 1 < len(rest) else directory
        rest = rest[:i] + rest[i + 2:]
    files = [a for a in rest if a != "-" and not a.startswith("-")]
    if "c" in mode:
        buf = io.BytesIO()
        err, code = "", 0
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as archive:
            for f in files:
                path = _abs(sb, f, env)
                members = [path] if sb.fs.read(path) is not None else sorted(
                    p for p in list(sb.fs.files) + list(sb.fs.written) if p.startswith(path.rstrip("/") + "/"))
                if not members:
                    err += f"tar: {f}: Cannot stat: No such file or directory\n"
                    code = 2
                for member in members:
                    data = (sb.fs.read(member) or "").encode()
                    info = tarfile.TarInfo(member.lstrip("/"))
                    info.size, info.mtime, info.mode = len(data), int(sb.now), 0o644
                    archive.addfile(info, io.BytesIO(data))
        if code and not _busybox(sb):
            err += "tar: Exiting with failure status due to previous errors\n"
        # bytes that are not UTF-8 survive as surrogates, which the exec stream writes back as they were
        return code, buf.getvalue().decode("utf-8", "surrogateescape"), ("tar: Removing leading `/' from member names\n"
                                                        if files and files[0].startswith("/") and not _busybox(sb) else "") + err
    if "x" in mode:
        try:
            with tarfile.open(fileobj=io.BytesIO(stdin.encode("utf-8", "surrogateescape")), mode="r:*") as archive:
                for entry in archive.getmembers():
                    if not entry.isfile():
                        continue
                    extracted = archive.extractfile(entry)
                    text = extracted.read().decode(errors="replace") if extracted else ""
                    msg = sb.fs.write_checked(_abs(sb, directory.rstrip("/") + "/" + entry.name, env), text)
                    if msg:
                        return 2, "", f"tar: {entry.name}: Cannot open: {msg}\n"
        except tarfile.TarError:
            return 2, "", "tar: This does not look like a tar archive\n"
        return 0, "", ""
    return 2, "", "tar: You must specify one of the '-Acdtrux', '--delete' or '--test-label' options\n"


_DEVICES = ("/dev/zero", "/dev/urandom", "/dev/random")
# random bytes with the high bit cleared: the filesystem holds text, and ASCII keeps a large file
# one byte per character in memory and the same bytes when tar or nginx encode it again
_SEVEN_BITS = bytes(i & 0x7F for i in range(256))


def _two_digits(v: float) -> str:
    return f"{v:.1f}" if v < 10 else f"{v:.0f}"


def _gnu_size(n: float) -> str:
    """coreutils dd's " (42 MB, 40 MiB)" after the byte count (nothing under a kilobyte)."""
    for si_unit, si, iec_unit, iec in (("GB", 1e9, "GiB", 2**30), ("MB", 1e6, "MiB", 2**20), ("kB", 1e3, "KiB", 2**10)):
        if n >= si:
            return f" ({_two_digits(n / si)} {si_unit}, {_two_digits(n / iec)} {iec_unit})"
    return ""


@tool("dd")
def dd(sb: Sandbox, argv: list[str], stdin: str, env: dict[str, str]) -> Result:
    """dd if=SRC of=DST bs=N count=N: copies from a device, a file or stdin to a file or stdout;
    a write from a device is accounted on the filesystem it lands on (apps/generic.py's dd, which
    the container's own command runs), so a tmpfs fills and an exec'd dd gets ENOSPC as busybox's."""
    import random

    from kubesim.apps.generic import _dd, _dd_number
    ops = dict(a.split("=", 1) for a in argv[1:] if "=" in a)
    bad = next((a for a in argv[1:] if "=" not in a), None)
    if bad is not None:
        return 1, "", f"dd: unrecognized operand '{bad}'\n" if not _busybox(sb) else f"dd: invalid argument '{bad}'\n"
    bs = _dd_number(ops.get("bs", "512"))
    count = _dd_number(ops["count"]) if "count" in ops else None
    if bs is None or ("count" in ops and count is None):
        return 1, "", f"dd: invalid number '{ops.get('bs', '') if bs is None else ops.get('count', '')}'\n"
    source, out = ops.get("if", ""), ops.get("of", "")
    if source in _DEVICES:
        if count is None:
            return 1, "", "dd: an endless device needs count= here (the emulator stops no process on a signal)\n"
        if out:
            code, lines = _dd(sb.ctx, argv[1:], [])
            if code == 137:
                return 137, "", ""
            if lines and lines[0].startswith("dd: can't open"):
                return 1, "", lines[0] + "\n"
            nbytes = int(lines[-1].split(" ", 1)[0]) if lines else bs * count
        else:
            code, nbytes = 0, bs * count
        if source == "/dev/zero":
            data = "\0" * nbytes
        else:
            rng = random.Random(f"{sb.c.container_id}:{out}:{sb.now}")
            data = rng.randbytes(nbytes).translate(_SEVEN_BITS).decode("ascii")
    else:
        if source:
            text = sb.fs.read(_abs(sb, source, env))
            if text is None:
                return 1, "", (f"dd: can't open '{source}': No such file or directory\n" if _busybox(sb) else
                               f"dd: failed to open '{source}': No such file or directory\n")
        else:
            text = stdin
        data = text[:bs * count] if count is not None else text
        code, nbytes = 0, len(data.encode("utf-8", "surrogateescape"))
    out_text = ""
    if out:
        msg = sb.fs.write_checked(_abs(sb, out, env), data)
        if msg:
            return 1, "", (f"dd: can't open '{out}': {msg}\n" if _busybox(sb) else
                           f"dd: failed to open '{out}': {msg}\n")
    else:
        out_text = data
    full, part = nbytes // bs, int(nbytes % bs > 0)
    seconds = max(nbytes / 1.6e9, 2e-5)
    records = f"{full}+{part} records in\n{full}+{part} records out\n"
    if _busybox(sb):
        from kubesim.apps.generic import _human
        stats = f"{nbytes} bytes ({_human(nbytes)}B) copied, {seconds:.6f} seconds, {_human(nbytes / seconds)}B/s\n"
    else:
        rate = nbytes / seconds
        speed = f"{rate / 1e9:.1f} GB/s" if rate >= 1e9 else f"{rate / 1e6:.0f} MB/s" if rate >= 1e6 else f"{rate / 1e3:.0f} kB/s"
        stats = f"{nbytes} bytes{_gnu_size(nbytes)} copied, {seconds:.5g} s, {speed}\n"
    if code:
        return code, out_text, f"dd: writing '{out}': No space left on device\n" + records + stats
    return 0, out_text, records + stats
