#!/usr/bin/env python3
"""Check usbgw's layering map (gateway/LAYERS) against the tree.

Every #include "..." line of every program's sources (gateway/, client/,
client/agent/, client/attach/, contrib/sim/) and every call between their
objects (nm -u against nm --defined-only of the built objects) must go to
the same unit or to one the map lets it use; inside a folder with an
order (the core's, the agent's), to the same line or one above.  Each
violation is printed as FILE:LINE: what it uses: the rule it breaks.

usage: layers.py [--map FILE] [--src DIR] [--obj DIR] [--require-objects]
                 [--graph]
  --src  the tree (default: this script's ../..)
  --obj  the build folder whose objects are read (default SRC/build);
         without objects (none found) only #include lines are checked;
         --require-objects: a .c without its object is a violation
Every .c and .h below gateway/, client/ and contrib/sim/ must be in a
unit's folder, and every module of an ordered unit on a line of its order.
  --graph  print the unit-level graph that was found, and exit 0
A "known FILE TARGET" line of the map lets one listed upward edge pass
(printed as known); one that no longer exists is a violation, so the
list only shrinks.
Exit: 0 when every edge is allowed, 1 on a violation, 2 on a bad map.
"""
import os
import re
import subprocess
import sys

INC = re.compile(r'^\s*#\s*include\s+(?:"([^"]+)"|<([^>]+)>)')
# where the programs' sources live: every .c and .h below these must be
# in a unit's folder
ROOTS = ('gateway', 'client', 'contrib/sim')


def die(msg):
    print('layers: ' + msg, file=sys.stderr)
    sys.exit(2)


def parse_map(path):
    """units: name -> set of units it may use; order: unit -> {module: n}."""
    uses, order, where, known = {}, {}, {}, {}
    with open(path) as f:
        for ln, raw in enumerate(f, 1):
            line = raw.split('#', 1)[0].strip()
            if not line:
                continue
            words = line.split()
            if words[0] == 'unit':
                if len(words) < 3 or words[2] != 'uses':
                    die('%s:%d: expected "unit NAME uses UNIT... | -"' %
                        (path, ln))
                name = words[1]
                if name in uses:
                    die('%s:%d: unit %s given twice (first at line %d)' %
                        (path, ln, name, where[name]))
                uses[name] = set(w for w in words[3:] if w != '-')
                where[name] = ln
            elif words[0] == 'order':
                if len(words) < 4 or not words[2].isdigit():
                    die('%s:%d: expected "order UNIT N MODULE..."' %
                        (path, ln))
                o = order.setdefault(words[1], {})
                for m in words[3:]:
                    if m in o:
                        die('%s:%d: %s is in %s\'s order twice' %
                            (path, ln, m, words[1]))
                    o[m] = int(words[2])
            elif words[0] == 'known':
                if len(words) != 3:
                    die('%s:%d: expected "known FILE TARGET"' % (path, ln))
                known[(words[1], words[2])] = ln
            else:
                die('%s:%d: expected "unit", "order" or "known", got "%s"'
                    % (path, ln, words[0]))
    for u, deps in uses.items():
        for d in deps:
            if d not in uses:
                die('%s: unit %s uses %s, which is not a unit' %
                    (path, u, d))
    for u in order:
        if u not in uses:
            die('%s: order for %s, which is not a unit' % (path, u))
    return uses, order, known


def module(rel):
    return os.path.splitext(os.path.basename(rel))[0]


class CallSite:
    """FILE:LINE of a call, found only when it is printed."""
    texts = {}

    def __init__(self, src, rel, sym):
        self.src, self.rel, self.sym = src, rel, sym

    def __str__(self):
        if self.rel not in self.texts:
            with open(os.path.join(self.src, self.rel),
                      errors='replace') as f:
                self.texts[self.rel] = f.read().split('\n')
        pat = re.compile(r'\b%s\b' % re.escape(self.sym))
        ln = next((i + 1 for i, l in enumerate(self.texts[self.rel])
                   if pat.search(l)), 0)
        return '%s:%d' % (self.rel, ln)


class Checker:
    def __init__(self, src, mapfile):
        self.src = src
        self.map = mapfile
        self.uses, self.order, self.debts = parse_map(mapfile)
        self.used_debts = set()
        self.bad = []
        self.graph = {}
        self.known_lines = []

    def dirs(self):
        for u in self.uses:
            yield u, (u if (u.startswith('client') or
                            u.startswith('contrib/')) else 'gateway/' + u)

    def sources(self):
        folders = {}
        for u, d in self.dirs():
            folders[d] = u
            if not os.path.isdir(os.path.join(self.src, d)):
                self.bad.append('%s: unit %s has no folder %s' %
                                (self.map, u, d))
        for root in ROOTS:
            top = os.path.join(self.src, root)
            for dirpath, dirnames, files in os.walk(top):
                dirnames.sort()
                rel_dir = os.path.relpath(dirpath, self.src)
                for n in sorted(files):
                    if not n.endswith(('.c', '.h')):
                        continue
                    rel = os.path.join(rel_dir, n)
                    u = folders.get(rel_dir)
                    if u is None:
                        self.bad.append('%s: in no unit of %s (a folder '
                                        'of its own needs a "unit" line)'
                                        % (rel, self.map))
                        continue
                    if u in self.order and \
                            module(rel) not in self.order[u]:
                        self.bad.append('%s: %s is not in %s\'s order (%s)'
                                        % (rel, module(rel), u, self.map))
                    yield u, rel

    def rank(self, u, m):
        return self.order.get(u, {}).get(m)

    def edge(self, fu, fm, tu, tm, where, what, key=None):
        """fu/fm (file unit, module) uses tu/tm; record or complain."""
        self.graph.setdefault(fu, set()).add(tu)
        n = len(self.bad)
        self._edge(fu, fm, tu, tm, where, what)
        if len(self.bad) > n and key in self.debts:
            self.used_debts.add(key)
            self.known_lines.append('known (%s line %d): %s' % (
                self.map, self.debts[key], self.bad.pop()))

    def _edge(self, fu, fm, tu, tm, where, what):
        if tu == fu:
            if fu not in self.order or tm == fm:
                return
            a, b = self.rank(fu, fm), self.rank(tu, tm)
            if a is None:
                self.bad.append('%s: %s is not in %s\'s order (%s)' %
                                (where, fm, fu, self.map))
            elif b is None:
                self.bad.append('%s: %s: %s is not in %s\'s order (%s)' %
                                (where, what, tm, fu, self.map))
            elif b > a:
                self.bad.append('%s: %s: %s (%s line %d) is above %s (line '
                                '%d): calls and includes run downward' %
                                (where, what, tm, fu, b, fm, a))
            return
        if tu not in self.uses[fu]:
            self.bad.append('%s: %s: %s may not use %s (%s: unit %s uses %s)'
                            % (where, what, fu, tu, self.map, fu,
                               ' '.join(sorted(self.uses[fu])) or '-'))

    def check_includes(self):
        known = {}
        for u, rel in self.sources():
            known[rel] = u
        for rel, u in known.items():
            with open(os.path.join(self.src, rel), errors='replace') as f:
                for ln, line in enumerate(f, 1):
                    mo = INC.match(line)
                    if not mo:
                        continue
                    inc = mo.group(1) or mo.group(2)
                    here = os.path.normpath(os.path.join(
                        os.path.dirname(rel), inc))
                    if here in known:
                        target = here
                    elif os.path.normpath('gateway/' + inc) in known:
                        target = os.path.normpath('gateway/' + inc)
                    elif mo.group(2) is not None:
                        continue    # a system header
                    else:
                        continue    # a test's or generated header
                    if rel.startswith('gateway/') and '/' not in inc:
                        self.bad.append('%s:%d: #include "%s": a gateway '
                                        'header is named with its folder'
                                        % (rel, ln, inc))
                    self.edge(u, module(rel), known[target], module(target),
                              '%s:%d' % (rel, ln), '#include "%s"' % inc,
                              (rel, target))
        self.known = known

    def check_calls(self, obj, require):
        objs = {}
        for rel, u in self.known.items():
            if rel.endswith('.c'):
                o = os.path.join(obj, rel[:-2] + '.o')
                if os.path.exists(o):
                    objs[rel] = o
                elif require:
                    self.bad.append('%s: no object %s (build first): its '
                                    'calls cannot be checked' % (rel, o))
        if not objs:
            return 0
        # two runs of nm over every object (-A: each line names its file)
        byobj = {o: rel for rel, o in objs.items()}

        def nm(flags):
            out = subprocess.run(['nm', '-A'] + flags + sorted(byobj),
                                 capture_output=True, text=True).stdout
            for line in out.splitlines():
                path, _, rest = line.partition(': ')
                if path not in byobj:
                    path, _, rest = line.partition(':')
                p = rest.split()
                if path in byobj and p:
                    yield byobj[path], p
        defs = {}
        for rel, p in nm(['-g', '--defined-only']):
            if len(p) == 3:
                defs.setdefault(p[2], rel)
        for rel, p in nm(['-u']):
            s = p[-1]
            t = defs.get(s)
            if t is None or t == rel:
                continue
            self.edge(self.known[rel], module(rel), self.known[t],
                      module(t), CallSite(self.src, rel, s),
                      'calls %s() of %s' % (s, t))
        return len(objs)


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    src = os.path.normpath(os.path.join(here, '..', '..'))
    mapfile = obj = None
    graph = require = False
    i = 1
    while i < len(argv):
        a = argv[i]
        if a in ('--map', '--src', '--obj') and i + 1 < len(argv):
            v = argv[i + 1]
            if a == '--map':
                mapfile = v
            elif a == '--src':
                src = v
            else:
                obj = v
            i += 2
        elif a == '--graph':
            graph = True
            i += 1
        elif a == '--require-objects':
            require = True
            i += 1
        else:
            die('usage: layers.py [--map FILE] [--src DIR] [--obj DIR] '
                '[--require-objects] [--graph] (got "%s")' % a)
    mapfile = mapfile or os.path.join(src, 'gateway', 'LAYERS')
    obj = obj or os.path.join(src, 'build')
    c = Checker(src, mapfile)
    c.check_includes()
    nobj = c.check_calls(obj, require)
    if graph:
        for u in sorted(c.graph):
            print('%-14s %s' % (u, ' '.join(sorted(c.graph[u] - {u}))))
        return 0
    for k in sorted(set(c.debts) - c.used_debts):
        c.bad.append('%s:%d: known %s %s: no such edge any more (remove '
                     'the line)' % (mapfile, c.debts[k], k[0], k[1]))
    for b in c.known_lines:
        print(b)
    for b in c.bad:
        print(b)
    print('layers: %d files, %d objects, %d violations, %d known' %
          (len(c.known), nobj, len(c.bad), len(c.known_lines)))
    return 1 if c.bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
