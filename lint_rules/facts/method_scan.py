"""How one body is read for ``entry_uses``: ``MethodScan`` follows a method (or a function with one
parameter standing for ``self``) statement by statement and records its uses, local aliases of self
and of submodules, what it assigns to ``self.<attr>``, returns and builds."""

from __future__ import annotations

import ast
from typing import Callable, Optional, Sequence

from lint_rules.facts.guards import GuardReader, constant_arguments
from lint_rules.facts.model import (
    ATTR_CALL, DYNAMIC_CALL, ELEMENT_METHOD, PASS_CALL, READ, RESULT_CALL, RESULT_METHOD, SELF_CALL, SRC_ATTR, SRC_CALL,
    SRC_ELEMENT, SRC_NOT_MODULE, SRC_PARAM, SRC_PARAM_CALL, SRC_REF, SRC_RESULT, SRC_UNKNOWN, SUB_CALL, SUB_METHOD,
    SUB_RESULT, SUPER_CALL, Guard, Source, Use,
)
from lint_rules.facts.names import Names
from lint_rules.facts.walk import (
    LEAVES, Arg, Param, arg_slots, call_args, child_nodes, dotted_name, is_constant, is_super_call, is_type_of, params,
    positional_params, render_chain, split_chain, stored_names, string_value,
)
from lint_rules.vocabulary import (
    ADD_ELEMENT, ADD_SUBMODULE, CALLS_FIRST, COPY_FUNCS, ELEMENT_METHODS, FORWARD_NAMES, MODULE_CONTAINERS,
    MODULE_RETURNS_SELF, PAIR_METHODS, PARTIAL, PASSTHROUGH_FUNCS, RUN_KEYWORDS, RUNS_ARGUMENT,
)

# Calls that hand a module over without running it, or builtins: no summary to look up.
_NOT_PASSING = frozenset(dir(__import__("builtins"))) | {"super"}
# Displays, f-strings, lambdas and operations are never modules; so are constants but None and ``...``
# (``not_a_module``).
_NOT_MODULE_NODES = frozenset({
    ast.JoinedStr, ast.Lambda, ast.List, ast.Tuple, ast.Dict, ast.Set, ast.ListComp,
    ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Compare, ast.UnaryOp, ast.BinOp,
})
# What iterating something yields: ("sub", attr), ("self", ""), a tuple of shapes, or None.
Shape = object


class MethodScan:
    """Uses and attribute assignments of one method body (its nested functions included)."""

    def __init__(self, names: Names, self_name: Optional[str], params: dict[str, Param]):
        self.names = names
        self.self_name = self_name
        self.params = params
        self.uses: list[tuple[ast.AST, Use]] = []
        self.local_calls: list[tuple[ast.Call, str, tuple[Optional[str], ...], Callable[[str], str],
                                     tuple[Guard, ...]]] = []
        # local name -> what it may stand for: ("attr"|"sub"|"self"|"result"|"dynamic", attribute or getter)
        self.bindings: dict[str, tuple[tuple[str, str], ...]] = {}
        self.locals: dict[str, list[ast.expr]] = {}
        self.assigned: list[tuple[str, Optional[ast.expr]]] = []  # self.<attr> = expr
        self.elements: list[tuple[str, ast.expr]] = []  # self.<attr>.append(expr)
        self.local_elements: dict[str, list[ast.expr]] = {}  # layers.append(expr)
        self.registered: list[str] = []
        # local lists whose elements are registered under computed names (`for i, layer in
        # enumerate(layers): self.add_module(f"layer{i}", layer)`): what they hold are submodules
        self.registered_locals: set[str] = set()  # ... and "self.<attr>" for `enumerate(self.layers)`
        self.loop_over: dict[str, str] = {}  # loop variable -> the local (or "self.<attr>") it iterates
        self.returns: list[str] = []  # attributes returned as `return self.<attr>...`
        self.builds: list[str] = []  # `return X(...)`: what X resolves to
        self.calls_param = False  # calls one of its parameters (``encoder(obs)``): a function summary is kept
        # The walk's ``if`` tests, read as guards on this method's parameters (``watch``); none for
        # a function read with a parameter as self, which is read after the walk
        self.conditions: Sequence[tuple[ast.expr, bool]] = ()
        self.guard_reader: Optional[GuardReader] = None
        self.own_body = True  # the walk is in the method's own body, not a function nested in it
        self.fixed_guards: Optional[tuple[Guard, ...]] = None  # a local call's, kept from when it was read

    @classmethod
    def for_function(cls, names: Names, node: ast.FunctionDef, kind: str,
                     self_param: Optional[str] = "") -> "MethodScan":
        """``self_param``: the parameter that stands for self ("": the first positional one)."""
        self_name = self_param or None
        positional = positional_params(node)
        if self_param == "" and kind not in ("staticmethod", "classmethod") and positional:
            self_name = positional[0]
        return cls(names, self_name, {p.name: p for p in params(node, stars=True) if p.name != self_name})

    # -- events from the walk ----------------------------------------------------------------
    def on_for(self, node: ast.For | ast.comprehension) -> None:
        self.bind(node.target, self.shape(node.iter))
        target, over = node.target, node.iter
        if type(over) is ast.Call and type(over.func) is ast.Name and over.func.id == "enumerate" and over.args \
                and type(target) is ast.Tuple and len(target.elts) == 2:
            target, over = target.elts[1], over.args[0]
        if type(target) is not ast.Name:
            return
        if type(over) is ast.Name and over.id in self.locals:
            self.loop_over[target.id] = over.id
        elif type(over) is ast.Attribute and self.is_self(over.value):
            self.loop_over[target.id] = f"self.{over.attr}"

    def on_assign_stmt(self, node: ast.Assign) -> None:
        for target in node.targets:
            self.on_assign(target, node.value)

    def on_ann_assign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.on_assign(node.target, node.value)

    def on_return(self, node: ast.Return) -> None:
        value = node.value
        if value is None:
            return
        root, steps = split_chain(value)
        if self.is_self(root) and steps and steps[0] is not None:
            self.returns.append(steps[0])
        if type(value) is ast.Name and len(self.locals.get(value.id, ())) == 1:
            value = self.locals[value.id][0]
        if type(value) is ast.Call:
            dotted = dotted_name(value.func)
            if dotted is not None and dotted.split(".", 1)[0] != self.self_name:
                self.builds.append(self.names.resolve(dotted))

    def on_assign(self, target: ast.expr, value: Optional[ast.expr]) -> None:
        """``value`` None: assigned something the file does not spell out (tuple unpacking)."""
        if type(target) is ast.Tuple or type(target) is ast.List:
            values = value.elts if type(value) is ast.Tuple or type(value) is ast.List else None
            for i, element in enumerate(target.elts):
                starred = type(element) is ast.Starred
                paired = values is not None and i < len(values) and not starred
                self.on_assign(element.value if starred else element,
                               _unstarred(values[i]) if paired else None)
            return
        if type(target) is ast.Name and value is not None:
            self.locals.setdefault(target.id, []).append(value)
            bindings = self.binding_of(value)
            if bindings:
                self.bindings[target.id] = bindings
        elif type(target) is ast.Attribute and self.is_self(target.value):
            self.assigned.append((target.attr, value))

    def binding_of(self, value: ast.expr, depth: int = 0) -> tuple[tuple[str, str], ...]:
        """What a local name assigned ``value`` may stand for, when it is a piece of self
        (``model = self if fsdp is None else fsdp``: either branch)."""
        if type(value) is ast.IfExp and depth < 4:
            return self.binding_of(value.body, depth + 1) + self.binding_of(value.orelse, depth + 1)
        if type(value) is ast.BoolOp and depth < 4:
            left, right = _halves(value)
            return self.binding_of(left, depth + 1) + self.binding_of(right, depth + 1)
        value = self.unwrap_self(value)
        root, steps = split_chain(value)
        if self.is_self(root) and not steps:
            return (("this", ""),)
        if self.is_self(root) and steps and steps[0] is not None:
            if len(steps) == 1:
                return (("attr", steps[0]),)
            return (("sub", steps[0]),)
        if type(root) is ast.Name and root.id in self.bindings and not steps:
            return self.bindings[root.id]
        if type(root) is ast.Call and not steps:
            func, args = root.func, call_args(root)
            if type(func) is ast.Name and func.id == "getattr" and len(args) >= 2 and (
                    self.is_self(args[0].value) or is_type_of(args[0].value, self.self_name)):
                attr = string_value(args[1].value)
                return (("attr", attr),) if attr else (("dynamic", ""),)
            inner_root, inner_steps = split_chain(func)
            if self.is_self(inner_root) and len(inner_steps) == 1 and inner_steps[0]:
                return (("result", inner_steps[0]),)
        return ()

    # -- calls -----------------------------------------------------------------------------
    def is_self(self, expr: ast.expr) -> bool:
        return self.self_name is not None and type(expr) is ast.Name and expr.id == self.self_name

    def on_call(self, call: ast.Call) -> None:
        func, args = call.func, call_args(call)
        kind = type(func)
        if kind is ast.Name and func.id in self.params:
            self.calls_param = True
        name = func.attr if kind is ast.Attribute else (func.id if kind is ast.Name else "")
        if name in ADD_SUBMODULE and kind is ast.Attribute \
                and self.is_self(func.value) and args:
            attr = string_value(args[0].value)
            if attr:
                self.registered.append(attr)
            elif len(args) > 1:
                self._register_element(args[1].value)
        elif name == "setattr" and len(args) == 3 and self.is_self(args[0].value):
            attr = string_value(args[1].value)
            if attr:
                self.assigned.append((attr, args[2].value))
            else:
                self._register_element(args[2].value)
        elif name in ADD_ELEMENT and kind is ast.Attribute and args:
            root, steps = split_chain(func.value)
            if self.is_self(root) and len(steps) == 1 and steps[0] is not None:
                self.elements.append((steps[0], args[-1].value))
            elif type(root) is ast.Name and not steps:
                self.local_elements.setdefault(root.id, []).append(args[-1].value)
        if name in CALLS_FIRST and args and not args[0].keyword and self.is_self(args[0].value):
            self.add(call, Use(SELF_CALL, "", 0, f"{name}({self.self_name}, ...)"))  # made to be called
        if name in RUNS_ARGUMENT:
            target = _run_target(call)
            if target is not None:
                self.classify_callee(call, self.unwrap_self(target), lambda text: f"{name}({text}, ...)")
        else:
            self.passes(call)
        self.classify_callee(call, func, _called)

    def element_reads(self, fn: ast.FunctionDef) -> None:
        """In a property's getter: ``layer.codebook`` for ``layer`` of ``self.layers`` (or an alias of
        a submodule), read without a call; another property's getter runs there. Read from the
        tree after the walk, when the loop variables are bound: getters are few."""
        called = {id(node.func) for node in ast.walk(fn) if type(node) is ast.Call}
        for node in ast.walk(fn):
            if type(node) is not ast.Attribute or type(node.value) is not ast.Name or id(node) in called \
                    or type(node.ctx) is not ast.Load:
                continue
            name = node.value.id
            for kind, attr in self.bindings.get(name, ()):
                if kind in ("attr", "sub"):
                    holder = attr if kind == "attr" else f"{attr}[]"
                    self.add(node, Use(READ, holder, 0, f"{name}.{node.attr} with {name} from self.{attr}", node.attr))

    def _register_element(self, value: ast.expr) -> None:
        """A module registered under a computed name: if it is an element of a local list (a loop
        variable over it, or ``layers[i]``), that list holds submodules."""
        if type(value) is ast.Subscript:
            value = value.value
        if type(value) is ast.Attribute and self.is_self(value.value):  # self.layers[i]
            self.registered_locals.add(f"self.{value.attr}")
        elif type(value) is ast.Name:
            listed = self.loop_over.get(value.id, value.id)
            if listed in self.locals or listed in self.local_elements or listed.startswith("self."):
                self.registered_locals.add(listed)

    def passes(self, call: ast.Call) -> None:
        """``fn(self.model, ...)``, ``generate_fn(model=self)``, ``partial(fn, self.enc)``: self or a
        submodule handed to a function; whether it runs it is the function's summary's to say."""
        func, args = call.func, call_args(call)
        ref = self.callee_ref(func)
        if ref in PARTIAL and args and not args[0].keyword and not args[0].star:
            func, args = args[0].value, args[1:]
            ref = self.callee_ref(func)
        if ref is None:
            return
        position = 0
        for arg in args:
            if arg.star:
                break  # positions past *args are unknown
            slot = arg.keyword if arg.keyword is not None else str(position)
            position += arg.keyword is None
            piece = self.piece_of_self(arg.value)
            if piece is not None:
                shown = f"self.{piece}" if piece else "self"
                called = ref.replace("super.", "super().", 1) if ref.startswith("super.") else dotted_name(func)
                text = f"{called}({slot + '=' if arg.keyword is not None else ''}{shown}, ...)"
                self.add(call, Use(PASS_CALL, piece, 0, text, f"{ref}#{slot}"))

    def handed(self, args: Sequence[Arg]) -> str:
        """Self or submodules among a call's arguments, as ``Source.param`` keeps them ("0:,model:enc")."""
        pieces = []
        for slot, arg in arg_slots(args):
            piece = self.piece_of_self(arg.value)
            if piece is not None:
                pieces.append(f"{slot}:{piece}")
        return ",".join(pieces)

    def callee_ref(self, func: ast.expr) -> Optional[str]:
        """The function a call calls, resolved through imports; None for methods of self,
        parameters, local names, builtins and torch (whose functions that run a module given
        to them are ``RUNS_ARGUMENT``)."""
        if type(func) is ast.Attribute and is_super_call(func.value):
            return f"super.{func.attr}"  # a base's method: `super().encode(obs, self.encoder)`
        dotted = dotted_name(func)
        if dotted is None:
            return None
        head = dotted.split(".", 1)[0]
        if head == self.self_name and dotted.count(".") == 1:
            return dotted.replace(head, "self", 1)  # a method of the class: `self._run(self.model)`
        if head == self.self_name or head in self.params or head in self.bindings or (
                head in self.locals and head not in self.names.imports):
            return None
        if "." not in dotted and dotted in _NOT_PASSING:
            return None
        ref = self.names.resolve(dotted)
        return None if ref.split(".", 1)[0] == "torch" else ref

    def piece_of_self(self, expr: ast.expr) -> Optional[str]:
        """"" for self, the attribute for ``self.enc``/``self.blocks[i]`` or an alias of one."""
        root, steps = split_chain(self.unwrap_self(expr))
        if self.is_self(root):
            if not steps:
                return ""
            if steps[0] is not None and all(step is None for step in steps[1:]):
                return steps[0]
            return None
        if type(root) is ast.Name and not steps:
            for kind, attr in self.bindings.get(root.id, ()):
                if kind == "this":
                    return ""
                if kind in ("attr", "sub"):
                    return attr
        return None

    def classify_callee(self, call: ast.Call, func: ast.expr, show: Callable[[str], str]) -> None:
        root, steps = split_chain(func)
        if type(root) is ast.Call:
            self.classify_call_result(call, root, steps, show)
            return
        if type(root) is not ast.Name:
            return
        if self.is_self(root):
            self.classify_self_chain(call, steps, show)
        elif steps == ("forward",) and call.func is func and (args := call_args(call)) \
                and self.is_self(args[0].value):
            self.add(call, Use(SELF_CALL, "", 0, show(f"{root.id}.forward") + " with self"))
        elif not steps or None in steps or steps[-1] in FORWARD_NAMES or len(steps) == 1:
            self.local_calls.append((call, root.id, steps, show, self.guards_now()))

    def classify_call_result(self, call: ast.Call, inner: ast.Call, steps: tuple[Optional[str], ...],
                             show: Callable[[str], str]) -> None:
        """``super().forward(...)``, ``type(self).forward(self)``, ``self.get_encoder()(...)``,
        ``getattr(self, name)(...)``."""
        if is_super_call(inner):
            if len(steps) == 1 and steps[0] is not None:
                self.add(call, Use(SUPER_CALL, steps[0], 0, show(f"super().{steps[0]}")))
            return
        func, args = inner.func, call_args(inner)
        if type(func) is ast.Name and func.id in ("type", "getattr") and args and (
                self.is_self(args[0].value) or is_type_of(args[0].value, self.self_name)):
            if func.id == "type" and steps[-1:] == ("forward",):
                self.add(call, Use(SELF_CALL, "", 0, show("type(self).forward")))
            elif func.id == "getattr" and not steps and len(args) >= 2:
                self.classify_getattr(call, inner, show)
            return
        root, inner_steps = split_chain(func)
        if self.is_self(root) and len(inner_steps) == 1 and inner_steps[0] and len(steps) == 1 \
                and steps[0] is not None and steps[0] not in FORWARD_NAMES:
            text = show(render_chain(self.self_name or "self", inner_steps) + "()." + steps[0])
            self.add(call, Use(RESULT_METHOD, inner_steps[0], 0, text, method=steps[0]))
            return
        if not self.is_self(root) or None in inner_steps or (steps and steps[-1] is not None
                                                             and steps[-1] not in FORWARD_NAMES):
            return
        text = show(render_chain(self.self_name or "self", inner_steps) + "()" + render_chain("", steps))
        if len(inner_steps) == 1:
            self.add(call, Use(RESULT_CALL, inner_steps[0], 0, text))
        elif len(inner_steps) == 2:
            self.add(call, Use(SUB_RESULT, inner_steps[0], 0, text, method=inner_steps[1]))

    def unwrap_self(self, expr: ast.expr) -> ast.expr:
        """``self.eval()`` and friends return ``self``: ``trace(self.eval(), x)`` runs self."""
        if type(expr) is ast.Call and type(expr.func) is ast.Attribute \
                and self.is_self(expr.func.value) and expr.func.attr in MODULE_RETURNS_SELF:
            return expr.func.value
        return expr

    def classify_getattr(self, call: ast.Call, inner: ast.Call, show: Callable[[str], str]) -> None:
        attr = string_value(call_args(inner)[1].value)
        if attr is not None:
            self.classify_self_chain(call, (attr,), show)
        else:  # dispatch by a computed name: resolved against names quoted in the file
            self.add(call, Use(DYNAMIC_CALL, "", 0, show("getattr(self, ...)")))

    def classify_self_chain(self, call: ast.Call, steps: tuple[Optional[str], ...],
                            show: Callable[[str], str], text: str = "") -> None:
        text = text or show(render_chain(self.self_name or "self", steps))
        last = steps[-1] if steps else None
        calls_it = not steps or last is None or last in FORWARD_NAMES
        if not steps or steps in (("forward",), ("__call__",)) or (steps[0] is None and calls_it):
            self.add(call, Use(SELF_CALL, "", 0, text))
        elif len(steps) == 1:
            self.add(call, Use(ATTR_CALL, steps[0], 0, text, arguments=constant_arguments(call)))
        elif calls_it and steps[0] is not None:
            self.add(call, Use(SUB_CALL, steps[0], 0, text))
        elif len(steps) == 2 and steps[0] is not None:
            self.add(call, Use(SUB_METHOD, steps[0], 0, text, method=last))
        else:  # self.layers[i].decode(x), self.model.quantizer.decode(x), self[0].encode(x)
            path = render_chain("", steps[:-1]).lstrip(".").replace("[...]", "[]")
            self.add(call, Use(ELEMENT_METHOD, path, 0, text, method=last))

    def watch(self, conditions: Sequence[tuple[ast.expr, bool]], node: ast.FunctionDef, kind: str) -> None:
        """Give the uses found from now on the guards the walk's ``conditions`` set on parameters."""
        self.conditions = conditions
        positional = positional_params(node)[kind != "staticmethod":]  # what a call through self fills
        self.guard_reader = GuardReader(list(self.params.values()), positional)

    def guards_now(self) -> tuple[Guard, ...]:
        """The guards on this method's parameters that the walk's current statement runs under
        (none in a nested function: its parameters may shadow the method's)."""
        if not self.own_body or not self.conditions or self.guard_reader is None:
            return ()
        return self.guard_reader.guards_of(self.conditions)

    def add(self, node: ast.AST, use: Use) -> None:
        guards = self.fixed_guards if self.fixed_guards is not None else self.guards_now()
        if guards:
            use = use._replace(guards=guards)
        self.uses.append((node, use))

    def guarded_uses(self, fn: ast.FunctionDef) -> list[tuple[ast.AST, Use]]:
        """The uses, without the guards on parameters the body rebinds (``mode = mode or "x"``,
        ``mode += 1``, ``for mode in ...``): the test no longer reads what the caller passed."""
        if not any(use.guards for _, use in self.uses):
            return self.uses
        bound = stored_names(fn)
        return [(node, use._replace(guards=tuple(g for g in use.guards if g.param not in bound))
                 if any(g.param in bound for g in use.guards) else use) for node, use in self.uses]

    # -- local names: loop variables and aliases of submodules -----------------------------
    def shape(self, expr: ast.expr) -> Shape:
        if type(expr) is ast.Call:
            func = expr.func
            args = [a.value for a in call_args(expr)]
            if type(func) is ast.Name:
                if func.id == "enumerate" and args:
                    return (None, self.shape(args[0]))
                if func.id == "zip":
                    return tuple(self.shape(a) for a in args)
                if func.id in PASSTHROUGH_FUNCS and args:
                    return self.shape(args[0])
            if type(func) is ast.Attribute:
                inner = self.shape(func.value)
                if func.attr in ELEMENT_METHODS:
                    return inner
                if func.attr in PAIR_METHODS and inner is not None:
                    return (None, inner)
            return None
        root, steps = split_chain(expr)
        if self.is_self(root) and not steps:
            return ("self", "")
        if self.is_self(root) and steps and steps[0] is not None and all(s is None for s in steps[1:]):
            return ("sub", steps[0])
        if type(root) is ast.Name and not steps:
            for kind, attr in self.bindings.get(root.id, ()):
                if kind in ("this", "self"):
                    return ("self", "")
                if kind in ("attr", "sub"):
                    return ("sub", attr)
        return None

    def bind(self, target: ast.expr, shape: Shape) -> None:
        if shape is None:
            return
        leaf = isinstance(shape, tuple) and shape[:1] in (("sub",), ("self",))
        if type(target) is ast.Name and leaf:
            self.bindings[target.id] = (shape,)
        elif (type(target) is ast.Tuple or type(target) is ast.List) and isinstance(shape, tuple) and not leaf:
            for element, inner in zip(target.elts, shape):
                self.bind(_unstarred(element), inner)

    def resolve_local_calls(self) -> None:
        """Calls on local names bound to pieces of self, read as the chains they stand for
        (``m = self.enc; m.encode(x)`` is ``self.enc.encode(x)``)."""
        for call, name, steps, show, self.fixed_guards in self.local_calls:
            bound = self.bindings.get(name)
            if not bound:  # most: ``x.view(...)``, ``torch.cat(...)``
                continue
            text = show(render_chain(name, steps))
            for kind, attr in bound:
                if kind == "this":
                    self.classify_self_chain(call, steps, show, f"{text} with {name} = self")
                elif kind == "attr":
                    self.classify_self_chain(call, (attr, *steps), show, f"{text} with {name} = self.{attr}")
                elif kind == "sub":
                    self.classify_self_chain(call, (attr, None, *steps), show, f"{text} with {name} from self.{attr}")
                elif kind == "self":
                    self.classify_self_chain(call, (None, *steps), show, f"{text} with {name} a child of self")
                elif kind == "result" and not steps:
                    self.add(call, Use(RESULT_CALL, attr, 0, f"{text} with {name} = self.{attr}()"))
                elif kind == "dynamic" and not steps:
                    self.add(call, Use(DYNAMIC_CALL, "", 0, f"{text} with {name} = getattr(self, ...)"))
        self.fixed_guards = None

    # -- attribute sources -----------------------------------------------------------------
    def sources(self, value: Optional[ast.expr], depth: int = 0) -> list[Source]:
        if value is None or depth > 4:
            return [Source(SRC_UNKNOWN)]
        kind = type(value)
        if kind is ast.Name:
            name = value.id
            assigned = [s for v in self.locals.get(name, ()) for s in self.sources(v, depth + 1)]
            if name in self.params:  # and what the body may have put there instead (`m = m or M()`)
                return [Source(SRC_PARAM, self.names.annotation_ref(self.params[name].annotation), name), *assigned]
            if name in self.locals:
                return assigned
            return [Source(SRC_REF, self.names.resolve(name))]
        if kind is ast.Constant and value.value is None:
            return []
        if not_a_module(value):  # True, False, numbers, strings, displays, operations
            return [Source(SRC_NOT_MODULE)]
        if kind is ast.IfExp:
            return self.sources(value.body, depth + 1) + self.sources(value.orelse, depth + 1)
        if kind is ast.BoolOp:
            left, right = _halves(value)
            return self.sources(left, depth + 1) + self.sources(right, depth + 1)
        if kind is ast.Attribute and self.is_self(value.value):
            return [Source(SRC_ATTR, value.attr)]
        if kind is ast.Attribute:
            dotted = dotted_name(value)
            if dotted is not None and dotted.split(".", 1)[0] not in (self.self_name, *self.params, *self.locals):
                return [Source(SRC_REF, self.names.resolve(dotted))]
            return [Source(SRC_UNKNOWN)]
        if kind is ast.Call:
            func = value.func
            args = call_args(value)
            if type(func) is ast.Name and func.id in self.params:
                param = self.params[func.id]
                ref = _default_ref(self.names, param.default) if param.default is not None else None
                return [Source(SRC_PARAM_CALL, ref or self.names.annotation_ref(param.annotation))]
            dotted = dotted_name(func)
            if dotted is None:
                return [Source(SRC_UNKNOWN)]
            if dotted.rsplit(".", 1)[-1] in COPY_FUNCS and args:
                return self.sources(args[0].value, depth + 1)
            if dotted.split(".", 1)[0] == self.self_name:
                return [Source(SRC_RESULT, dotted.split(".")[1])] if dotted.count(".") == 1 else [Source(SRC_UNKNOWN)]
            ref = self.names.resolve(dotted)
            found = [Source(SRC_CALL, ref, self.handed(args))]
            if ref.rpartition(".")[2] in MODULE_CONTAINERS:
                found.extend(Source(SRC_ELEMENT, element) for element in self.built_in([a.value for a in args]))
            return found
        return [Source(SRC_UNKNOWN)]

    def registered_sources(self, attr: str, value: Optional[ast.expr]) -> list[Source]:
        """``self.layers = layers`` of a local list whose elements were registered (or
        ``self.layers = [...]`` registered through ``self.layers``): the classes built into it, as
        a container's elements (a plain list is no module, but holds them)."""
        registered = f"self.{attr}" in self.registered_locals or (
            type(value) is ast.Name and value.id in self.registered_locals)
        if not registered or value is None:
            return []
        return [Source(SRC_ELEMENT, ref) for ref in self.built_in([value])]

    def built_in(self, values: Sequence[ast.expr], depth: int = 0) -> list[str]:
        """Classes constructed in a container's arguments (``[Block() for _ in range(n)]``, a local
        list appended to, a dict of them)."""
        found: list[str] = []
        stack: list[ast.AST] = list(values)
        while stack:
            node = stack.pop()
            kind = type(node)
            if kind is ast.Call:
                dotted = dotted_name(node.func)
                if dotted is not None and dotted.split(".", 1)[0] not in (self.self_name, *self.params):
                    ref = self.names.resolve(dotted)
                    if ref.rpartition(".")[2] not in MODULE_CONTAINERS:
                        found.append(ref)
                        continue
                stack.extend(arg.value for arg in call_args(node))
            elif kind is ast.Name and depth < 2:
                name = node.id
                for value in [*self.locals.get(name, ()), *self.local_elements.get(name, ())]:
                    found.extend(self.built_in([value], depth + 1))
            elif kind is not ast.Lambda and kind not in LEAVES:
                stack.extend(child_nodes(node))
        return found


def _called(text: str) -> str:
    """How a call of ``text`` is shown."""
    return text + "(...)"


def _run_target(call: ast.Call) -> Optional[ast.expr]:
    """The module or callable a checkpoint/trace/export call runs: first positional argument or
    a keyword such as ``func=``/``module=``."""
    for arg in call_args(call):
        if arg.keyword is None and not arg.star:
            return arg.value
        if arg.keyword is not None and arg.keyword in RUN_KEYWORDS:
            return arg.value
    return None


def _unstarred(expr: ast.expr) -> ast.expr:
    """The expression a ``*x`` element stars (``x``), or the element itself."""
    return expr.value if type(expr) is ast.Starred else expr


def _halves(node: ast.BoolOp) -> tuple[ast.expr, ast.expr]:
    """``a or b or c`` as ``(a or b)`` and ``c``: binary and nested to the left, as the depth limits count."""
    values = node.values
    left = values[0] if len(values) == 2 else ast.BoolOp(node.op, values[:-1])
    return left, values[-1]


def _default_ref(names: Names, default: ast.expr) -> Optional[str]:
    """What a parameter's default names, ``None``, ``True`` and ``False`` included: ``norm_layer=None``
    called as ``norm_layer(...)`` builds from ``"None"``, which is known to be no module class."""
    if is_constant(default, None, True, False):
        return str(default.value)
    return names.dotted_ref(default)


def not_a_module(expr: Optional[ast.expr]) -> bool:
    """A literal, display or operation: never a module. Of the constants, ``None`` (no module at all)
    and ``...`` (anything) are left to the caller."""
    kind = type(expr)
    if kind is ast.Constant:
        return expr.value is not None and expr.value is not Ellipsis
    return kind in _NOT_MODULE_NODES
