"""What a check read: the files whose facts its findings can depend on (issue 37: re-check after an
edit only the files whose findings depend on it).

The checks of one run share what they computed (a class's analysis, where a name leads, the
verdict of a method name), so the files a check reads itself are not enough: an answer it reused
was computed during another check, from that check's reads. So the analysis keeps one log of what
it reads, in order. When a memoised answer's computation ends, what it wrote is taken out of the
log and kept as that answer's, a reference left in its place; reusing the answer writes another
reference. A check's reads are its stretch of the log with every reference expanded, whichever
check computed the answers it reused. A reference to an answer still being computed (a cycle)
stands for all of its computations, once they end.

Tokens: a file's path (its facts were read), or a scan of every file of the view by a key (the
callers of a method name, the classes with a base of a name, the registrations of a method...):
``scan``. A file takes part in a scan's answer by what ``contributions`` says it gives that key, so
an edit of a file changes the answer of exactly the scans whose contribution it changes.

Off unless ``ProjectIndex.reads`` is set (``benchmarks/dependents.py`` and its test set it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Hashable, Union

if TYPE_CHECKING:
    from lint_rules.facts.model import FileFacts

# The scans of every file, by what they look for
CALLERS = "callers"  # functions that call or hand over a method name (``ProjectIndex.callers_of``)
BASES = "bases"  # classes with a base of a last name (``ProjectIndex.subclasses``)
OWNERS = "owners"  # classes whose method of a name does something (``computation._owners``)
METHODS = "methods"  # classes with a plain method of a name (FWD003's hint)
MARKS = "marks"  # registrations of a method name (``marks.registered``)
SET_UPS = "set-ups"  # set-ups of models of known classes (``marks.set_ups``)
ATTRIBUTES = "attributes"  # what every class assigns to its attributes (FWD101's handed parameters)
SCAN = "*"  # the prefix of a scan's token

#: An entry of the log: a token read, or a memoised answer reused (memo, key).
Entry = Union[str, tuple[str, Hashable]]


def scan(kind: str, key: str = "") -> str:
    return f"{SCAN}{kind}:{key}"


def contributions(facts: FileFacts) -> dict[str, list]:
    """What the file gives each scan's answer, by the scan's token."""
    found: dict[str, list] = {}
    for used, owner in facts.attribute_uses:
        found.setdefault(scan(CALLERS, used), []).append(owner)
    for cls in facts.classes:
        for base in cls.bases:
            found.setdefault(scan(BASES, base.rpartition(".")[2]), []).append((cls.qualname, cls.bases))
        for method in cls.methods:
            if method.kind == "method":
                found.setdefault(scan(METHODS, method.name), []).append(cls.qualname)
                if method.uses:
                    found.setdefault(scan(OWNERS, method.name), []).append(cls.qualname)
        if cls.attrs:
            found.setdefault(scan(ATTRIBUTES), []).append((cls.qualname, cls.attrs))
    for mark in facts.marks:
        found.setdefault(scan(MARKS, mark.name), []).append(mark)
    if any(site.cls for site in facts.wrap_sites):
        found[scan(SET_UPS)] = list(facts.wrap_sites)
    return found


class ReadLog:
    """The log: what the analysis read, in order. A memoised answer's computation is taken out of it
    when it ends (``done``) and kept as that answer's, one reference to it left in its place: a
    stretch of the log then holds its own reads and references, never an inner answer's reads a
    second time."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.answers: dict[tuple[str, Hashable], list[Entry]] = {}  # (memo, key) -> what its computations read

    def read(self, token: str) -> None:
        self.entries.append(token)

    def begin(self) -> int:
        return len(self.entries)

    def done(self, memo: str, key: Hashable, start: int) -> None:
        """The answer ``key`` of ``memo`` was computed over the log from ``start`` until now."""
        answer = (memo, key)
        self.answers.setdefault(answer, []).extend(self.entries[start:])
        del self.entries[start:]
        self.entries.append(answer)

    def reused(self, memo: str, key: Hashable) -> None:
        """The answer ``key`` of ``memo`` was reused (or met while it is being computed)."""
        answer = (memo, key)
        if self.entries and self.entries[-1] == answer:  # asked again at once (``is_submodule`` of each attribute)
            return
        self.entries.append(answer)

    def tokens(self, stretches: dict[str, tuple[int, int]]) -> dict[str, frozenset[str]]:
        """The tokens each stretch (start, end) of the log read, every reference expanded: a
        reference to an answer stands for everything its computations read (a cycle: all of the
        answers on it), expanded once for all stretches (Tarjan's strongly connected components)."""
        answers = self.answers
        expanded: dict[Answer, frozenset[str]] = {}
        order: dict[Answer, int] = {}  # when each answer was first met
        low: dict[Answer, int] = {}
        path: list[Answer] = []  # answers met whose component is not complete yet
        on_path: set[Answer] = set()
        for entries in (self.entries[first:last] for first, last in stretches.values()):
            for root in entries:
                if type(root) is str or root in order:
                    continue
                order[root] = low[root] = len(order)
                path.append(root)
                on_path.add(root)
                work = [(root, iter(answers.get(root, ())))]  # type: ignore[arg-type]
                while work:
                    node, children = work[-1]
                    for child in children:
                        if type(child) is str:
                            continue
                        if child not in order:
                            order[child] = low[child] = len(order)
                            path.append(child)
                            on_path.add(child)
                            work.append((child, iter(answers.get(child, ()))))  # type: ignore[arg-type]
                            break
                        if child in on_path:
                            low[node] = min(low[node], order[child])
                    else:
                        work.pop()
                        if work:
                            parent = work[-1][0]
                            low[parent] = min(low[parent], low[node])
                        if low[node] == order[node]:
                            expanded.update(_component(node, path, on_path, answers, expanded))
        return {name: frozenset(_own(self.entries[first:last], expanded)) for name, (first, last) in stretches.items()}


Answer = tuple[str, Hashable]


def _own(entries: list[Entry], expanded: dict[Answer, frozenset[str]]) -> set[str]:
    """The tokens of ``entries``, with those of the (expanded) answers they reference."""
    found: set[str] = set()
    merged: set[int] = set()  # an answer is referenced again and again (each question asked of a class)
    for entry in entries:
        if type(entry) is str:
            found.add(entry)  # type: ignore[arg-type]
        else:
            tokens = expanded.get(entry)  # type: ignore[arg-type]
            if tokens is not None and id(tokens) not in merged:
                merged.add(id(tokens))
                found |= tokens
    return found


def _component(head: Answer, path: list[Answer], on_path: set[Answer], answers: dict[Answer, list[Entry]],
               expanded: dict[Answer, frozenset[str]]) -> dict[Answer, frozenset[str]]:
    """The answers of the component that ``head`` completes, each with the tokens of all of them."""
    members: list[Answer] = []
    while True:
        member = path.pop()
        on_path.discard(member)
        members.append(member)
        if member == head:
            break
    found: set[str] = set()
    for member in members:
        found |= _own(answers.get(member, []), expanded)  # its own members are not expanded yet: skipped
    tokens = frozenset(found)
    return {member: tokens for member in members}
