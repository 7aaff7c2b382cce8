"""The module graph of each crate: which module's code names which module's items.

Usage: python3 scripts/module-graph.py [ROOT.rs ...]   (default: every crate's lib.rs and main.rs)
Exits 1, naming each, when a module imports upward or modules form a circle.


An edge M -> N when M's code (its test module left out) names an item
defined in N, through `crate::`, `super::`, `self::` or a child module's
relative path, re-exports followed to where the item is defined. A module
importing upward names an item defined in one of its ancestors; a circle
is a strongly connected component of more than one module.
"""
import os, re, sys
from collections import defaultdict

def modules(src):
    mods = {}
    def walk(path, file):
        mods[path] = file
        text = open(file).read()
        for m in re.finditer(r'^\s*(?:#\[[^\n]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;', text, re.M):
            name = m.group(1)
            d, base = os.path.dirname(file), os.path.basename(file)
            if base in ('lib.rs', 'main.rs', 'mod.rs'):
                cands = [os.path.join(d, name + '.rs'), os.path.join(d, name, 'mod.rs')]
            else:
                stem = base[:-3]
                cands = [os.path.join(d, stem, name + '.rs'), os.path.join(d, stem, name, 'mod.rs')]
            for c in cands:
                if os.path.exists(c):
                    walk(path + (name,), c); break
    walk((), src)
    return mods

def code(file):
    text = open(file).read()
    m = re.search(r'^#\[cfg\(test\)\]\n(?:#\[[^\n]*\]\n)*mod \w+ \{', text, re.M)
    if m: text = text[:m.start()]
    text = re.sub(r'//[^\n]*', '', text)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    return text

def use_items(text):
    """(prefix path list, name) for every `use` item, groups expanded."""
    out = []
    for m in re.finditer(r'\buse\s+([^;]+);', text):
        def expand(prefix, body):
            body = body.strip()
            mm = re.match(r'^([\w:]*?)::\{(.*)\}$', body, re.S)
            if mm:
                pre = prefix + [p for p in mm.group(1).split('::') if p]
                depth, cur, parts = 0, '', []
                for ch in mm.group(2):
                    if ch == '{': depth += 1
                    if ch == '}': depth -= 1
                    if ch == ',' and depth == 0: parts.append(cur); cur = ''
                    else: cur += ch
                parts.append(cur)
                for p in parts:
                    if p.strip(): expand(pre, p)
            elif body.startswith('{'):
                inner = body[1:-1]
                for p in inner.split(','):
                    if p.strip(): expand(prefix, p)
            else:
                segs = [s.strip() for s in body.split(' as ')[0].split('::') if s.strip()]
                out.append(prefix + segs)
        expand([], m.group(1))
    return out

def analyse(src):
    mods = modules(src)
    texts = {p: code(f) for p, f in mods.items()}
    # names each module re-exports or defines
    defined = defaultdict(set)
    for p, t in texts.items():
        for m in re.finditer(r'^\s*(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?(?:fn|struct|enum|type|const|static|trait|union)\s+(\w+)', t, re.M):
            defined[p].add(m.group(1))
        for m in re.finditer(r'macro_rules!\s*(\w+)', t):
            defined[p].add(m.group(1))
    def resolve(here, segs, seen=0):
        """the module defining the item segs names, from module `here`."""
        if seen > 20 or not segs: return None
        head = segs[0]
        if head == 'crate': base, rest = (), segs[1:]
        elif head == 'self': base, rest = here, segs[1:]
        elif head == 'super': base, rest = here[:-1], segs[1:]
        elif here + (head,) in mods: base, rest = here, segs
        else: return None  # external crate or std
        while rest and rest[0] == 'super': base, rest = base[:-1], rest[1:]
        while rest and base + (rest[0],) in mods: base, rest = base + (rest[0],), rest[1:]
        if not rest or rest[0] == '*' : return base
        name = rest[0]
        if name in defined[base]: return base
        # a re-export in base: follow it (to nothing of ours when it names another crate's)
        for item in uses[base]:
            if item and item[-1] == name:
                return resolve(base, item, seen + 1)
        for item in uses[base]:
            if item and item[-1] == '*':
                glob = resolve(base, item[:-1] + ['x'], seen + 1) if len(item) > 1 else None
                if glob is not None and name in defined[glob]: return glob
        return base
    uses = {p: use_items(t) for p, t in texts.items()}
    edges = defaultdict(set)
    why = defaultdict(list)
    for p, t in texts.items():
        refs = list(uses[p])
        for m in re.finditer(r'(?<![\w:])((?:crate|super|self|\w+)(?:::\w+)+)', t):
            refs.append(m.group(1).split('::'))
        for segs in refs:
            target = resolve(p, segs)
            if target is None or target == p: continue
            edges[p].add(target)
            why[(p, target)].append('::'.join(segs))
    return mods, edges, why

def components(edges):
    index, low, stack, on, res, counter = {}, {}, [], set(), [], [0]
    nodes = set(edges) | {b for v in edges.values() for b in v}
    sys.setrecursionlimit(10000)
    def strong(v):
        index[v] = low[v] = counter[0]; counter[0] += 1
        stack.append(v); on.add(v)
        for w in edges.get(v, ()):
            if w not in index: strong(w); low[v] = min(low[v], low[w])
            elif w in on: low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v: break
            if len(comp) > 1: res.append(comp)
    for v in sorted(nodes):
        if v not in index: strong(v)
    return res

def name(p): return '::'.join(p) or 'crate'

def self_test():
    """The check fails where it must: an upward import and a circle in a made-up crate."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        files = {
            'lib.rs': 'mod a;\nmod b;\npub struct Root;\n',
            'a.rs': 'use crate::b::B;\npub struct A;\npub fn f(_: B) {}\n',
            'b.rs': 'use crate::a::A;\nuse crate::Root;\npub struct B;\npub fn g(_: A, _: Root) {}\n',
        }
        for name, text in files.items():
            open(os.path.join(d, name), 'w').write(text)
        mods, edges, _ = analyse(os.path.join(d, 'lib.rs'))
        assert ('b',) in edges[('a',)] and ('a',) in edges[('b',)], edges
        assert () in edges[('b',)], 'b names the root\'s item: upward'
        assert components(edges), 'a and b form a circle'


if __name__ == '__main__':
    import glob
    self_test()
    roots = sys.argv[1:] or sorted(glob.glob('crates/*/src/lib.rs') + glob.glob('crates/*/src/main.rs')
                                   + ['src/lib.rs', 'src/main.rs'])
    bad = 0
    for src in roots:
        mods, edges, why = analyse(src)
        upward = [(a, b) for a, bs in edges.items() for b in bs if len(b) < len(a) and a[:len(b)] == b]
        circles = components(edges)
        print(f"{src}: {len(mods)} modules, {sum(map(len, edges.values()))} edges, "
              f"{len(upward)} upward, {len(circles)} circles")
        for a, b in sorted(upward):
            print(f"  upward: {name(a)} -> {name(b)} ({', '.join(sorted(set(why[(a, b)]))[:4])})")
        for c in circles:
            print("  circle:", ' '.join(sorted(name(x) for x in c)))
            for a in c:
                for b in edges[a]:
                    if b in c: print(f"    {name(a)} -> {name(b)} ({', '.join(sorted(set(why[(a, b)]))[:3])})")
        bad += len(upward) + len(circles)
    sys.exit(1 if bad else 0)
