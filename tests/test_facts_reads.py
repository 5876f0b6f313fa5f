"""The attributes a method reads on self without calling or assigning them (a property's getter
runs there), each once, at the line of its first read: found in the method's text."""

from __future__ import annotations

from lint_rules.facts.extract import extract
from lint_rules.facts.model import READ

SOURCE = '''\
import torch


class Net(torch.nn.Module):
    def step(self, x):
        z0 = myself.hidden
        y = self.scale * x
        self.count = 2
        if self.flag == 2:
            y = self.run(y)
        z = self.scale + self.shift(
        )
        return y + self.offset

    def other(this, x):
        return this.gain * x + self.not_this
'''


def _reads(method: str) -> list[tuple[str, int]]:
    facts = extract(SOURCE, "net.py", "net")
    (cls,) = facts.classes
    (found,) = [m for m in cls.methods if m.name == method]
    return [(use.method, use.line) for use in found.uses if use.kind == READ]


def test_each_attribute_read_once_at_its_first_line() -> None:
    assert _reads("step") == [("scale", 7), ("flag", 9), ("offset", 13)]


def test_the_first_parameter_is_self_whatever_its_name() -> None:
    assert _reads("other") == [("gain", 16)]
