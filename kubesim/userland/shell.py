"""A POSIX-ish `sh`: quoting, parameter expansion ($VAR, ${VAR:-x}, ${#VAR}, $?, $1..., $((...))),
command substitution, globbing, pipelines, `;` `&&` `||` `!`, redirections (> >> < 2>&1 2>/dev/null
&>), `if`/`for`/`while`/`until`, `( )` and `{ }`, and the builtins a one-liner uses. Commands
run through `Shell.run_command`, which the userland gives the image's PATH."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MAX_LOOP = 1000  # a loop that would run forever in a real container is cut short here
# What one exec may spend (commands run, bytes held): a script beyond it is killed as the OOM
# killer or a timeout would, so that no exec holds the cluster for long.
MAX_STEPS = 20_000
MAX_BYTES = 8_000_000
# The quotes whose text runs to the next same character, with dash's complaint when there is none.
_UNTERMINATED = {"'": "Unterminated quoted string", "`": "EOF in backquote substitution"}
_OPS = ("&&", "||", ";;", ">>", "&>", ">&", "<<", "|", "&", ";", "<", ">", "(", ")", "\n")
_RESERVED = {"if", "then", "elif", "else", "fi", "for", "in", "do", "done", "while", "until", "{", "}", "!"}


class ShellSyntaxError(Exception):
    pass


class ExitShell(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


@dataclass
class Tok:
    kind: str  # word | op | redir
    text: str
    fd: int | None = None


def tokenize(src: str) -> list[Tok]:
    out: list[Tok] = []
    i, n = 0, len(src)
    while i < n:
        ch = src[i]
        if ch in " \t":
            i += 1
            continue
        if ch == "\\" and i + 1 < n and src[i + 1] == "\n":
            i += 2
            continue
        if ch == "#":
            while i < n and src[i] != "\n":
                i += 1
            continue
        op = next((o for o in _OPS if src.startswith(o, i)), None)
        if op is not None:
            if op in (">", ">>", "<", ">&", "&>", "<<"):
                out.append(Tok("redir", op, 1 if op != "<" and op != "<<" else 0))
            else:
                out.append(Tok("op", op))
            i += len(op)
            continue
        start = i
        while i < n:
            ch = src[i]
            if ch in " \t\n|&;<>()":
                break
            if ch == "\\":
                i += 2
                continue
            if ch in _UNTERMINATED:
                j = src.find(ch, i + 1)
                if j < 0:
                    raise ShellSyntaxError(_UNTERMINATED[ch])
                i = j + 1
                continue
            if ch == '"':
                i = _skip_double(src, i + 1)
                continue
            if ch == "$" and i + 1 < n and src[i + 1] in "({":
                i = _skip_group(src, i + 1)
                continue
            i += 1
        word = src[start:i]
        if word.isdigit() and i < n and src[i] in "<>":
            op = ">>" if src.startswith(">>", i) else ">&" if src.startswith(">&", i) else src[i]
            out.append(Tok("redir", op, int(word)))
            i += len(op)
            continue
        out.append(Tok("word", word))
    return out


def _skip_double(src: str, i: int) -> int:
    while i < len(src):
        if src[i] == "\\":
            i += 2
            continue
        if src[i] == '"':
            return i + 1
        if src[i] == "$" and i + 1 < len(src) and src[i + 1] in "({":
            i = _skip_group(src, i + 1)
            continue
        i += 1
    raise ShellSyntaxError("Unterminated quoted string")


def _skip_group(src: str, i: int) -> int:
    """From the opening ( or { at i to just past its match."""
    close = ")" if src[i] == "(" else "}"
    depth = 0
    while i < len(src):
        ch = src[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "'" and close == ")":
            i = src.find("'", i + 1) + 1 or len(src)
            continue
        if ch == '"':
            i = _skip_double(src, i + 1)
            continue
        if ch == src[i] and ch in "({":
            depth += 1
        elif ch == close:
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ShellSyntaxError(f"missing '{close}'")


# -- the syntax tree ----------------------------------------------------------------------------
@dataclass
class Simple:
    words: list[str]
    assigns: list[tuple[str, str]]
    redirs: list[tuple[str, int, str]]  # (op, fd, target word)


@dataclass
class Pipeline:
    cmds: list[Any]
    negate: bool = False


@dataclass
class AndOr:
    first: Any
    rest: list[tuple[str, Any]]


@dataclass
class Seq:
    items: list[Any]


@dataclass
class If:
    branches: list[tuple[Any, Any]]
    otherwise: Any = None


@dataclass
class For:
    var: str
    words: list[str] | None
    body: Any


@dataclass
class While:
    cond: Any
    body: Any
    until: bool = False


@dataclass
class Group:
    body: Any
    subshell: bool
    redirs: list[tuple[str, int, str]] = field(default_factory=list)


class Parser:
    def __init__(self, toks: list[Tok]) -> None:
        self.toks, self.i = toks, 0

    def peek(self) -> Tok | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def is_word(self, *texts: str) -> bool:
        t = self.peek()
        return t is not None and t.kind == "word" and t.text in texts

    def is_op(self, *texts: str) -> bool:
        t = self.peek()
        return t is not None and t.kind == "op" and t.text in texts

    def expect_word(self, text: str) -> None:
        if not self.is_word(text):
            t = self.peek()
            raise ShellSyntaxError(f"syntax error: unexpected {repr(t.text) if t else 'end of file'} (expecting \"{text}\")")
        self.i += 1

    def skip_newlines(self) -> None:
        while self.is_op("\n"):
            self.i += 1

    def parse(self) -> Seq:
        seq = self.sequence(())
        if self.peek() is not None:
            raise ShellSyntaxError(f"syntax error: unexpected \"{self.peek().text}\"")  # type: ignore[union-attr]
        return seq

    def sequence(self, stop: tuple[str, ...]) -> Seq:
        items: list[Any] = []
        while True:
            self.skip_newlines()
            while self.is_op(";"):
                self.i += 1
                self.skip_newlines()
            t = self.peek()
            if t is None or (t.kind == "word" and t.text in stop) or self.is_op(")"):
                return Seq(items)
            items.append(self.and_or())
            if self.is_op(";", "&", "\n"):
                self.i += 1
                continue
            t = self.peek()
            if t is None or (t.kind == "word" and t.text in stop) or self.is_op(")"):
                return Seq(items)
            raise ShellSyntaxError(f"syntax error: unexpected \"{t.text}\"")

    def and_or(self) -> AndOr:
        first = self.pipeline()
        rest = []
        while self.is_op("&&", "||"):
            op = self.peek().text  # type: ignore[union-attr]
            self.i += 1
            self.skip_newlines()
            rest.append((op, self.pipeline()))
        return AndOr(first, rest)

    def pipeline(self) -> Pipeline:
        negate = False
        if self.is_word("!"):
            negate = True
            self.i += 1
        cmds = [self.command()]
        while self.is_op("|"):
            self.i += 1
            self.skip_newlines()
            cmds.append(self.command())
        return Pipeline(cmds, negate)

    def command(self) -> Any:
        if self.is_word("if"):
            self.i += 1
            branches = []
            cond = self.sequence(("then",))
            self.expect_word("then")
            body = self.sequence(("elif", "else", "fi"))
            branches.append((cond, body))
            otherwise = None
            while True:
                if self.is_word("elif"):
                    self.i += 1
                    cond = self.sequence(("then",))
                    self.expect_word("then")
                    branches.append((cond, self.sequence(("elif", "else", "fi"))))
                    continue
                if self.is_word("else"):
                    self.i += 1
                    otherwise = self.sequence(("fi",))
                self.expect_word("fi")
                return If(branches, otherwise)
        if self.is_word("for"):
            self.i += 1
            t = self.peek()
            if t is None or t.kind != "word":
                raise ShellSyntaxError("syntax error: bad for loop variable")
            var = t.text
            self.i += 1
            words: list[str] | None = None
            self.skip_newlines()
            if self.is_word("in"):
                self.i += 1
                words = []
                while self.peek() is not None and self.peek().kind == "word" and not self.is_word("do"):  # type: ignore[union-attr]
                    words.append(self.peek().text)  # type: ignore[union-attr]
                    self.i += 1
            while self.is_op(";", "\n"):
                self.i += 1
            self.expect_word("do")
            body = self.sequence(("done",))
            self.expect_word("done")
            return For(var, words, body)
        if self.is_word("while", "until"):
            until = self.peek().text == "until"  # type: ignore[union-attr]
            self.i += 1
            cond = self.sequence(("do",))
            self.expect_word("do")
            body = self.sequence(("done",))
            self.expect_word("done")
            return While(cond, body, until)
        if self.is_op("("):
            self.i += 1
            body = self.sequence(())
            if not self.is_op(")"):
                raise ShellSyntaxError("syntax error: missing ')'")
            self.i += 1
            return Group(body, True, self.redirections())
        if self.is_word("{"):
            self.i += 1
            body = self.sequence(("}",))
            self.expect_word("}")
            return Group(body, False, self.redirections())
        return self.simple()

    def redirections(self) -> list[tuple[str, int, str]]:
        out = []
        while self.peek() is not None and self.peek().kind == "redir":  # type: ignore[union-attr]
            out.append(self._redir())
        return out

    def _redir(self) -> tuple[str, int, str]:
        t = self.toks[self.i]
        self.i += 1
        target = self.peek()
        if target is None or target.kind != "word":
            raise ShellSyntaxError("syntax error: unexpected redirection")
        self.i += 1
        return t.text, t.fd if t.fd is not None else 1, target.text

    def simple(self) -> Simple:
        words: list[str] = []
        assigns: list[tuple[str, str]] = []
        redirs: list[tuple[str, int, str]] = []
        while True:
            t = self.peek()
            if t is None or t.kind == "op":
                break
            if t.kind == "redir":
                redirs.append(self._redir())
                continue
            m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", t.text, re.S)
            if not words and m:
                assigns.append((m.group(1), m.group(2)))
            else:
                if not words and not assigns and t.text in _RESERVED - {"{", "!"}:
                    break
                words.append(t.text)
            self.i += 1
        if not words and not assigns and not redirs:
            t = self.peek()
            raise ShellSyntaxError(f"syntax error: unexpected \"{t.text if t else 'end of file'}\"")
        return Simple(words, assigns, redirs)


# -- running ------------------------------------------------------------------------------------
Runner = Callable[["Shell", list[str], str, dict[str, str]], tuple[int, str, str]]


class Shell:
    """One shell process. `runner(shell, argv, stdin, env)` runs a non-builtin command;
    `glob(pattern)` lists the paths a pattern matches; `name` is how errors name the shell."""

    def __init__(self, env: dict[str, str], runner: Runner, glob: Callable[[str], list[str]],
                 name: str = "sh", args: list[str] | None = None, flavor: str = "ash",
                 budget: list[int] | None = None) -> None:
        self.budget = budget if budget is not None else [0]  # shared by the exec's every shell
        self.env = dict(env)
        self.runner, self.glob = runner, glob
        self.name, self.flavor = name, flavor
        self.args = args or [name]
        self.status = 0
        self.cwd = env.get("PWD", "/")
        self.files: Any = None  # set by the userland: what redirections write to

    # messages in the dialect of the shell the image has
    def not_found(self, cmd: str) -> str:
        return self._at_line_1("") + (f"{cmd}: command not found\n" if self.flavor == "bash" else f"{cmd}: not found\n")

    def syntax_error(self, msg: str) -> str:
        return f"{self._at_line_1('-c: ')}{msg}\n"

    def _at_line_1(self, bash_source: str) -> str:
        """How the shell starts a message about line 1 of its script; bash names the source first."""
        if self.flavor == "bash":
            return f"{self.name}: {bash_source}line 1: "
        if self.flavor == "dash":
            return f"{self.name}: 1: "
        return f"{self.name}: "

    def run_script(self, src: str, stdin: str = "") -> tuple[int, str, str]:
        try:
            tree = Parser(tokenize(src)).parse()
        except ShellSyntaxError as exc:
            return 2, "", self.syntax_error(str(exc))
        try:
            return self.run(tree, stdin)
        except ExitShell as e:
            return e.code, getattr(e, "out", ""), getattr(e, "err", "")

    def _spend(self, nbytes: int = 0) -> None:
        self.budget[0] += 1
        if self.budget[0] > MAX_STEPS or nbytes > MAX_BYTES:
            ex = ExitShell(137)
            ex.err = "Killed\n"  # type: ignore[attr-defined]
            raise ex

    def run(self, node: Any, stdin: str) -> tuple[int, str, str]:
        self._spend(len(stdin))
        if isinstance(node, Seq):
            outs: list[str] = []
            errs: list[str] = []
            code = 0
            for item in node.items:
                try:
                    code, o, e = self.run(item, stdin)
                except ExitShell as ex:
                    ex.out = "".join(outs) + getattr(ex, "out", "")  # type: ignore[attr-defined]
                    ex.err = "".join(errs) + getattr(ex, "err", "")  # type: ignore[attr-defined]
                    raise
                outs.append(o)
                errs.append(e)
                stdin = ""  # only the first command reads the shell's own stdin
            self.status = code
            return code, "".join(outs), "".join(errs)
        if isinstance(node, AndOr):
            code, out, err = self.run(node.first, stdin)
            for op, pipe in node.rest:
                if (op == "&&" and code == 0) or (op == "||" and code != 0):
                    code, o, e = self.run(pipe, "")
                    out, err = out + o, err + e
            self.status = code
            return code, out, err
        if isinstance(node, Pipeline):
            data, piped_err, code = stdin, "", 0
            for cmd in node.cmds:
                code, data, e = self.run(cmd, data)
                piped_err += e
            if node.negate:
                code = 0 if code else 1
            self.status = code
            return code, data, piped_err
        if isinstance(node, If):
            out = err = ""
            for cond, body in node.branches:
                c, o, e = self.run(cond, stdin)
                out, err = out + o, err + e
                if c == 0:
                    c, o, e = self.run(body, stdin)
                    return c, out + o, err + e
            if node.otherwise is not None:
                c, o, e = self.run(node.otherwise, stdin)
                return c, out + o, err + e
            return 0, out, err
        if isinstance(node, For):
            words = self.expand_all(node.words) if node.words is not None else self.args[1:]
            out, err, code = "", "", 0
            for w in words[:MAX_LOOP]:
                self.env[node.var] = w
                code, o, e = self.run(node.body, "")
                out, err = out + o, err + e
            return code, out, err
        if isinstance(node, While):
            out, err, code = "", "", 0
            for _ in range(MAX_LOOP):
                c, o, e = self.run(node.cond, "")
                out, err = out + o, err + e
                if (c == 0) == node.until:
                    break
                code, o, e = self.run(node.body, "")
                out, err = out + o, err + e
            return code, out, err
        if isinstance(node, Group):
            saved = (dict(self.env), self.cwd) if node.subshell else None
            try:
                code, out, err = self.run(node.body, stdin)
            except ExitShell as ex:
                if not node.subshell:
                    raise
                code, out, err = ex.code, getattr(ex, "out", ""), getattr(ex, "err", "")
            finally:
                if saved is not None:
                    self.env, self.cwd = saved
            return self._redirect(node.redirs, code, out, err)
        return self.simple(node, stdin)

    # -- expansion ----------------------------------------------------------------------------
    def expand_all(self, words: list[str]) -> list[str]:
        out: list[str] = []
        for w in words:
            out += self.expand(w)
        return out

    def expand(self, word: str, split: bool = True) -> list[str]:
        fields: list[str] = [""]
        has: list[bool] = [False]  # a quoted part makes an empty field count
        globbable = False
        i, n = 0, len(word)

        def add(text: str, splittable: bool) -> None:
            if not splittable or not split:
                fields[-1] += text
                if text:
                    has[-1] = True
                return
            parts = re.split(r"[ \t\n]+", text)
            for k, part in enumerate(parts):
                if k > 0:
                    fields.append("")
                    has.append(False)
                fields[-1] += part
                if part:
                    has[-1] = True

        while i < n:
            ch = word[i]
            if ch == "'":
                j = word.find("'", i + 1)
                fields[-1] += word[i + 1:j]
                has[-1] = True
                i = j + 1
            elif ch == '"':
                j = _skip_double(word, i + 1)
                fields[-1] += self._expand_double(word[i + 1:j - 1])
                has[-1] = True
                i = j
            elif ch == "\\" and i + 1 < n:
                fields[-1] += word[i + 1]
                has[-1] = True
                i += 2
            elif ch == "$" or ch == "`":
                text, i = self._dollar(word, i)
                add(text, True)
            else:
                if ch in "*?[":
                    globbable = True
                fields[-1] += ch
                has[-1] = True
                i += 1
        if word.startswith("~") and (len(word) == 1 or word[1] == "/"):
            fields[0] = self.env.get("HOME", "/root") + fields[0][1:]
        result = [f for f, h in zip(fields, has, strict=True) if h]
        if globbable and split:
            globbed: list[str] = []
            for f in result:
                matches = self.glob(f) if any(c in f for c in "*?[") else []
                globbed += matches or [f]
            return globbed
        return result

    def _expand_double(self, text: str) -> str:
        out, i = "", 0
        while i < len(text):
            ch = text[i]
            if ch == "\\" and i + 1 < len(text) and text[i + 1] in '$`"\\\n':
                out += text[i + 1]
                i += 2
            elif ch in "$`":
                t, i = self._dollar(text, i)
                out += t
            else:
                out += ch
                i += 1
        return out

    def _dollar(self, s: str, i: int) -> tuple[str, int]:
        if s[i] == "`":
            j = s.find("`", i + 1)
            return self._substitute(s[i + 1:j]), j + 1
        if s.startswith("$((", i):
            j = s.find("))", i)
            return self._arith(s[i + 3:j]), j + 2
        if s.startswith("$(", i):
            j = _skip_group(s, i + 1)
            return self._substitute(s[i + 2:j - 1]), j
        if s.startswith("${", i):
            j = _skip_group(s, i + 1)
            return self._param(s[i + 2:j - 1]), j
        m = re.match(r"\$([A-Za-z_][A-Za-z0-9_]*|[0-9?$#@*!-])", s[i:])
        if not m:
            return "$", i + 1
        return self._var(m.group(1)), i + len(m.group(0))

    def _var(self, name: str) -> str:
        if name == "?":
            return str(self.status)
        if name == "$":
            return "1"
        if name == "#":
            return str(len(self.args) - 1)
        if name in ("@", "*"):
            return " ".join(self.args[1:])
        if name == "!" or name == "-":
            return ""
        if name.isdigit():
            k = int(name)
            return self.args[k] if k < len(self.args) else ""
        return self.env.get(name, "")

    def _param(self, body: str) -> str:
        if body.startswith("#"):
            return str(len(self._var(body[1:])))
        m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*|[0-9?#@*])(:?[-=+?])(.*)$", body, re.S)
        if m:
            name, op, word = m.groups()
            val = self._var(name)
            unset = name not in self.env if not name.isdigit() else int(name) >= len(self.args)
            empty = unset or (op.startswith(":") and val == "")
            alt = self._expand_double(word)
            if op.endswith("-"):
                return alt if empty else val
            if op.endswith("="):
                if empty:
                    self.env[name] = alt
                    return alt
                return val
            if op.endswith("+"):
                return "" if empty else alt
            return val
        m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)(##?|%%?)(.*)$", body)
        if m:
            name, op, pat = m.groups()
            val = self._var(name)
            if op.startswith("#"):
                rng = range(len(val) + 1) if op == "#" else range(len(val), -1, -1)
                for k in rng:
                    if fnmatch.fnmatchcase(val[:k], pat):
                        return val[k:]
            else:
                rng = range(len(val), -1, -1) if op == "%" else range(len(val) + 1)
                for k in rng:
                    if fnmatch.fnmatchcase(val[k:], pat):
                        return val[:k]
            return val
        return self._var(body)

    def _arith(self, expr: str) -> str:
        expr = re.sub(r"\$?([A-Za-z_][A-Za-z0-9_]*)", lambda m: self.env.get(m.group(1), "0") or "0", expr)
        if not re.fullmatch(r"[0-9+\-*/%() <>=!&|]*", expr):
            return "0"
        try:
            value = eval(expr.replace("/", "//").replace("&&", " and ").replace("||", " or "), {"__builtins__": {}})  # noqa: S307 - digits and operators only
        except Exception:
            return "0"
        return str(int(value))

    def _substitute(self, src: str) -> str:
        sub = Shell(self.env, self.runner, self.glob, self.name, self.args, self.flavor, self.budget)
        sub.files, sub.cwd = self.files, self.cwd
        _, out, err = sub.run_script(src)
        self._sub_err = getattr(self, "_sub_err", "") + err
        return out.rstrip("\n")

    # -- simple commands ------------------------------------------------------------------------
    def simple(self, node: Simple, stdin: str) -> tuple[int, str, str]:
        self._sub_err = ""
        argv = self.expand_all(node.words)
        assigns = {k: (self.expand(v, split=False) or [""])[0] for k, v in node.assigns}
        self._spend(sum(len(a) for a in argv) + sum(len(v) for v in assigns.values()))
        pre_err = self._sub_err
        if not argv:
            self.env.update(assigns)
            return self._redirect(node.redirs, 0, "", pre_err)
        for op, fd, target in node.redirs:
            if op == "<" and fd == 0:
                path = (self.expand(target) or [""])[0]
                text = self.files.read(self._abs(path)) if self.files is not None else None
                if text is None:
                    return 1, "", pre_err + f"{self.name}: can't open {path}: no such file\n"
                stdin = text
        env = dict(self.env)
        env.update(assigns)
        try:
            code, out, err = self.builtin(argv, stdin, env)
        except ExitShell as ex:
            ex.err = pre_err + getattr(ex, "err", "")  # type: ignore[attr-defined]
            raise
        self.status = code
        self._spend(len(out) + len(err))
        return self._redirect(node.redirs, code, out, pre_err + err)

    def _abs(self, path: str) -> str:
        return path if path.startswith("/") else self.cwd.rstrip("/") + "/" + path

    def _redirect(self, redirs: list[tuple[str, int, str]], code: int, out: str, err: str) -> tuple[int, str, str]:
        for op, fd, target in redirs:
            if op in ("<", "<<"):
                continue
            path = (self.expand(target) or [""])[0]
            if op == ">&" or (op == ">" and path.startswith("&")):
                dest = path.lstrip("&")
                if fd == 2 and dest == "1":
                    out, err = out + err, ""
                elif fd == 1 and dest == "2":
                    out, err = "", err + out
                continue
            if op == "&>":
                data, out, err = out + err, "", ""
            elif fd == 2:
                data, err = err, ""
            else:
                data, out = out, ""
            if path == "/dev/null":
                continue
            if path in ("/dev/stderr",):
                err += data
                continue
            if path in ("/dev/stdout",):
                out += data
                continue
            if self.files is not None:
                err_msg = self.files.write_checked(self._abs(path), data, op == ">>")
                if err_msg:
                    return 1, out, err + f"{self.name}: can't create {path}: {err_msg}\n"
        return code, out, err

    def builtin(self, argv: list[str], stdin: str, env: dict[str, str]) -> tuple[int, str, str]:
        cmd = argv[0]
        if cmd == ":":
            return 0, "", ""
        if cmd == "exit":
            raise ExitShell(int(argv[1]) if len(argv) > 1 and argv[1].lstrip("-").isdigit() else self.status)
        if cmd == "export":
            for a in argv[1:]:
                k, eq, v = a.partition("=")
                if eq:
                    self.env[k] = v
            return 0, "", ""
        if cmd == "unset":
            for a in argv[1:]:
                self.env.pop(a, None)
            return 0, "", ""
        if cmd in ("set", "shopt", "trap", "ulimit", "umask", "wait", "hash", "alias"):
            return 0, "", ""
        if cmd == "cd":
            target = argv[1] if len(argv) > 1 else self.env.get("HOME", "/")
            path = self._abs(target)
            if self.files is not None and not self.files.is_dir(path):
                return 2 if self.flavor == "dash" else 1, "", f"{self.name}: cd: can't cd to {target}\n"
            self.cwd = path
            self.env["PWD"] = path
            return 0, "", ""
        if cmd == "pwd":
            return 0, self.cwd + "\n", ""
        if cmd == "read":
            names = [a for a in argv[1:] if not a.startswith("-")] or ["REPLY"]
            line = stdin.split("\n", 1)[0] if stdin else ""
            parts = line.split(None, len(names) - 1)
            for i, name in enumerate(names):
                self.env[name] = parts[i] if i < len(parts) else ""
            return (0 if stdin else 1), "", ""
        if cmd == "shift":
            count = int(argv[1]) if len(argv) > 1 else 1
            self.args = self.args[:1] + self.args[1 + count:]
            return 0, "", ""
        if cmd == "eval":
            sub = " ".join(argv[1:])
            return self.run_script_inline(sub, stdin)
        if cmd in ("type", "command") and len(argv) > 1 and (cmd == "type" or argv[1] in ("-v", "-V")):
            names = argv[1:] if cmd == "type" else argv[2:]
            out, code = "", 0
            for name in names:
                found = self.runner(self, ["\0which", name], "", env)
                if found[0] == 0:
                    out += found[1] if cmd == "command" else f"{name} is {found[1].strip()}\n"
                else:
                    code = 1
                    if cmd == "type":
                        out += f"{name}: not found\n"
            return code, out, ""
        if cmd == "command" and len(argv) > 1:
            argv = argv[1:]
        if cmd == "exec" and len(argv) > 1:
            code, out, err = self.runner(self, argv[1:], stdin, env)
            ex = ExitShell(code)
            ex.out, ex.err = out, err  # type: ignore[attr-defined]
            raise ex
        return self.runner(self, argv, stdin, env)

    def run_script_inline(self, src: str, stdin: str) -> tuple[int, str, str]:
        try:
            tree = Parser(tokenize(src)).parse()
        except ShellSyntaxError as exc:
            return 2, "", self.syntax_error(str(exc))
        return self.run(tree, stdin)
