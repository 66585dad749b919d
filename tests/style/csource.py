"""A small C (and CUDA C) reader for the style checks: which functions each source file
defines, declares and calls, by name, with their lines.

Not a compiler: it strips comments, strings and preprocessor lines, expands the project's own
function-like macros (the kernel families declare their twins through MW_*_DECL(sfx) macros,
cuda/optim.cu defines its kernels through one), and then reads the file scope by braces:
  - a definition is `... name ( ... ) {` at file scope, static when `static` precedes it;
  - a declaration is `type ... name ( ... ) ;` at file scope (typedefs aside);
  - a call is `name (` inside braces, not after `.` or `->` (a call through a struct's
    function pointer is not a call by name, and neither is taking a function's address).
Both branches of an #if are read, as the compiler never would: the project keeps them
balanced. Scans the folders the product is built from (common, kernels, cluster, worker)."""
import os
import re

TOPS = ("common", "kernels", "cluster", "worker")
EXTS = (".c", ".h", ".cu", ".cuh")
KEYWORDS = set("""
    if else for while do switch case default return break continue goto sizeof typeof
    __typeof__ _Alignof alignof _Alignas alignas _Static_assert static_assert _Generic
    __attribute__ __declspec __launch_bounds__ __asm__ asm defined void int char short long
    float double signed unsigned struct union enum typedef static extern inline const volatile
    restrict register auto _Bool bool __restrict__ __inline__ __global__ __device__ __host__
    template typename namespace decltype new delete operator return
""".split())
TOKEN = re.compile(r"""
    (?P<ws>[ \t\r\f\v]+) | (?P<nl>\n) | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<str>"(?:\\.|[^"\\\n])*") | (?P<chr>'(?:\\.|[^'\\\n])*')
  | (?P<id>[A-Za-z_]\w*) | (?P<num>\.?\d(?:[eEpP][+-]|[\w.])*)
  | (?P<punct>\#\#|->|<<<|>>>|\.\.\.|\S)
""", re.S | re.X)


class Tok:
    __slots__ = ("kind", "text", "line")

    def __init__(self, kind, text, line):
        self.kind, self.text, self.line = kind, text, line

    def __repr__(self):
        return self.text


def tokenize(text, line=1):
    """Tokens of text (comments and white space dropped), and the preprocessor lines as
    (line, directive text) with their continuations joined."""
    out, directives, at_line_start = [], [], True
    pos = 0
    while pos < len(text):
        if at_line_start:
            m = re.match(r"[ \t]*#((?:[^\n\\]|\\.)*)", text[pos:], re.S)
            if m:
                body = m.group(1)
                # a comment opened on the directive's line runs to its end
                c = re.search(r"/\*", body)
                if c and "*/" not in body[c.start():]:
                    end = text.find("*/", pos + m.start(1) + c.start())
                    body = body[: c.start()]
                    stop = end + 2 if end >= 0 else len(text)
                else:
                    stop = pos + m.end()
                directives.append((line, re.sub(r"\\\n", " ", body)))
                line += text.count("\n", pos, stop)
                pos = stop
                continue
        m = TOKEN.match(text, pos)
        kind = m.lastgroup
        tok = m.group(kind)
        if kind == "nl":
            at_line_start = True
        elif kind != "ws":
            at_line_start = False
            if kind != "comment":
                out.append(Tok(kind, tok, line))
        line += tok.count("\n")
        pos = m.end()
    return out, directives


def macros_of(directives):
    """{name: (params or None, body tokens)} of the #defines among directives."""
    out = {}
    for line, d in directives:
        m = re.match(r"\s*define\s+([A-Za-z_]\w*)(\(([^)]*)\))?(.*)", d, re.S)
        if not m:
            continue
        params = None
        if m.group(2) is not None:
            params = [p.strip() for p in m.group(3).split(",") if p.strip()]
        body, _ = tokenize(m.group(4), line)
        out[m.group(1)] = (params, body)
    return out


def _args(toks, i):
    """The arguments of a macro invocation whose '(' is toks[i]: (list of token lists, index
    after the ')'), or None when unbalanced."""
    depth, args, cur = 0, [], []
    for j in range(i, len(toks)):
        t = toks[j].text
        if t == "(":
            depth += 1
            if depth == 1:
                continue
        elif t == ")":
            depth -= 1
            if depth == 0:
                args.append(cur)
                return args, j + 1
        elif t == "," and depth == 1:
            args.append(cur)
            cur = []
            continue
        cur.append(toks[j])
    return None


def _substitute(params, body, args, line):
    names = {p: a for p, a in zip(params, args)}
    if params and params[-1] == "...":
        names["__VA_ARGS__"] = [t for a in args[len(params) - 1:] for t in a + [Tok("punct", ",", line)]][:-1]
    out = []
    i = 0
    while i < len(body):
        t = body[i]
        if t.text == "#" and i + 1 < len(body) and body[i + 1].text in names:
            out.append(Tok("str", '"..."', line))
            i += 2
            continue
        if t.text == "##" and out and i + 1 < len(body):
            nxt = body[i + 1]
            rhs = names.get(nxt.text, [nxt])
            left = out.pop()
            glued = left.text + (rhs[0].text if rhs else "")
            out.append(Tok("id" if re.match(r"\w+$", glued) else "punct", glued, line))
            out += [Tok(r.kind, r.text, line) for r in rhs[1:]]
            i += 2
            continue
        if t.text in names:
            out += [Tok(a.kind, a.text, line) for a in names[t.text]]
        else:
            out.append(Tok(t.kind, t.text, line))
        i += 1
    return out


def expand(toks, macros, busy=frozenset(), depth=0):
    """toks with the project's function-like macros expanded (each invocation's tokens carry
    the invocation's line)."""
    if depth > 8:
        return toks
    out, i = [], 0
    while i < len(toks):
        t = toks[i]
        m = macros.get(t.text) if t.kind == "id" and t.text not in busy else None
        if m and m[0] is not None and i + 1 < len(toks) and toks[i + 1].text == "(":
            got = _args(toks, i + 1)
            if got:
                args, i = got
                body = _substitute(m[0], m[1], args, t.line)
                out += expand(body, macros, busy | {t.text}, depth + 1)
                continue
        out.append(t)
        i += 1
    return out


def _declarator(stmt):
    """The function name a file-scope statement declares or defines, or None: the identifier
    before the first '(' at parenthesis depth 0 that follows a type (attributes skipped)."""
    depth, i = 0, 0
    while i < len(stmt):
        t = stmt[i].text
        if t in ("__attribute__", "__declspec", "__launch_bounds__", "alignas", "_Alignas"):
            i += 1
            d = 0
            while i < len(stmt):
                d += {"(": 1, ")": -1}.get(stmt[i].text, 0)
                i += 1
                if d == 0:
                    break
            continue
        if t in ("=", "typedef"):
            return None
        if t == "(" and depth == 0:
            prev = stmt[i - 1] if i > 0 else None
            before = [s for s in stmt[: i - 1] if s.kind == "id" and s.text != "extern"]
            if prev is not None and prev.kind == "id" and prev.text not in KEYWORDS and before:
                return prev
            return None
        i += 1
    return None


class Source:
    """One file: defs {name: (line, static)}, decls {name: line} (non-static prototypes),
    calls [(name, line)]."""

    def __init__(self, path, macros):
        self.path = path
        self.defs, self.decls, self.calls = {}, {}, []
        toks, _ = tokenize(open(path, encoding="utf-8", errors="replace").read())
        self._read(expand(toks, macros))

    def _read(self, toks):
        depth, stmt, kinds = 0, [], []
        i = 0
        while i < len(toks):
            t = toks[i]
            if depth == 0:
                if t.text == "extern" and i + 2 < len(toks) and toks[i + 1].kind == "str" \
                        and toks[i + 2].text == "{":
                    kinds.append("extern")  # extern "C" { ... }: still file scope
                    i += 3
                    continue
                if t.text == "{":
                    name = _declarator(stmt)
                    if name is not None:
                        static = any(s.text == "static" for s in stmt)
                        self.defs.setdefault(name.text, (name.line, static))
                    kinds.append("body")
                    depth, stmt = 1, []
                elif t.text == "}" and kinds and kinds[-1] == "extern":
                    kinds.pop()
                    stmt = []
                elif t.text == ";":
                    name = _declarator(stmt)
                    if name is not None and not any(s.text == "static" for s in stmt):
                        self.decls.setdefault(name.text, name.line)
                    stmt = []
                else:
                    stmt.append(t)
            else:
                if t.text == "{":
                    depth += 1
                elif t.text == "}":
                    depth -= 1
                    if depth == 0:
                        kinds.pop()
                elif t.kind == "id" and i + 1 < len(toks) and toks[i + 1].text == "(" \
                        and t.text not in KEYWORDS and (i == 0 or toks[i - 1].text not in (".", "->")):
                    self.calls.append((t.text, t.line))
            i += 1


def sources(root):
    """{path: Source} for every C and CUDA file under the product's folders, paths relative
    to root (the current directory becomes root)."""
    os.chdir(root)
    paths = []
    for top in TOPS:
        for d, _, names in os.walk(top):
            paths += [os.path.join(d, n) for n in names if n.endswith(EXTS)]
    own, shared = {}, {}
    for p in sorted(paths):
        _, directives = tokenize(open(p, encoding="utf-8", errors="replace").read())
        own[p] = {n: m for n, m in macros_of(directives).items() if m[0] is not None}
        for name, m in own[p].items():
            shared.setdefault(name, m)
    # a file's own #define wins over a same-named one elsewhere
    return {p: Source(p, {**shared, **own[p]}) for p in sorted(paths)}


def module(path):
    """A .c (or .cu) file and its .h (or .cuh) are one module."""
    return os.path.splitext(path)[0]
