"""Sphinx extension for the topicflow site: API pages, the CLI reference, notebook sizes, repository links.

Small pieces, each registered in :func:`setup`:

``topicflow-api`` directive
    ``{topicflow-api} topicflow.metrics`` documents a package and every public module below it (found by
    walking the package, so a new module shows up without touching the docs): one section per module with
    a summary table and ``automodule``. Names re-exported by ``topicflow`` itself (``topicflow.LDA``, ...)
    are documented there once (``{topicflow-exports} topicflow``: every name of ``topicflow.__all__``),
    and skipped in the module that defines them.
``topicflow-cli`` directive
    ``{topicflow-cli} topicflow.cli:main`` renders click's own ``--help`` text of the group and of every
    command (recursively), one section per command, so the page always matches what the CLI prints.
Notebook parameters (``source-read``)
    The notebooks keep one cell tagged ``parameters`` with their full-size defaults. The site runs them
    with the smaller values of the ``topicflow_notebook_parameters`` setting (one entry per notebook),
    so the whole build stays fast; the rendered parameters cell shows the values that produced the
    outputs below it.
Links to the repository (``doctree-read``) and to undocumented objects (``missing-reference``)
    The markdown pages link to files outside ``docs/``. A link to a file that is a page of the site
    (``topicflow_repository_pages``: ``../README.md``, ``../benchmarks/RESULTS.md``) goes to that page;
    MyST makes a link to another existing file a download (the file is copied into the site), and a
    link to a missing file warns. Cross-references in docstrings to ``topicflow`` objects that are not
    part of the API reference (model kernels, task builders) are rendered as code without a link, and
    a reference to a name that does not exist still warns.
numpydoc's template, compiled once
    numpydoc builds a new jinja environment and compiles its docstring template for every docstring it
    formats (about a tenth of the build); :func:`cache_numpydoc_template` keeps one compiled template.
Module docstrings and signatures (``autodoc-process-docstring``, ``autodoc-process-signature``)
    numpydoc formats the docstrings of functions and classes but leaves modules alone: their
    ``Glossary:`` blocks and ``References`` sections are turned into lists here. Signatures stay
    autodoc's (numpydoc's would split annotations such as ``dict[str, Any]`` at their commas).
"""
from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import types
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import click
import nbformat
from docutils import nodes
from docutils.parsers.rst import directives
from docutils.parsers.rst.states import RSTState
from docutils.statemachine import StringList
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

logger = logging.getLogger(__name__)

#: Width of the rendered ``--help`` text (click wraps to it), independent of the terminal running the build.
HELP_WIDTH = 80


# --- API pages -------------------------------------------------------------------------------------------

def public_modules(package: str) -> list[str]:
    """Return ``package`` and every public module below it, sorted (a name part starting with ``_`` is private)."""
    root = importlib.import_module(package)
    names = [package]
    if hasattr(root, "__path__"):
        for info in pkgutil.walk_packages(root.__path__, prefix=package + ".", onerror=_raise):
            if not any(part.startswith("_") for part in info.name.split(".")):
                names.append(info.name)
    return sorted(names)


def _raise(name: str) -> None:
    # walk_packages skips subpackages that fail to import; a broken module must fail the build instead.
    raise ImportError(f"cannot import {name!r} while collecting the API reference")


def top_level_names() -> dict[str, str]:
    """Return ``{defining module.name: public name}`` for the objects ``topicflow`` re-exports."""
    import topicflow

    out = {}
    for name in topicflow.__all__:
        obj = getattr(topicflow, name)
        module = getattr(obj, "__module__", None)
        if module and module != "topicflow" and (inspect.isclass(obj) or inspect.isfunction(obj)):
            out[f"{module}.{obj.__name__}"] = f"topicflow.{name}"
    return out


def documented_members(module: ModuleType) -> list[str]:
    """Return the names ``automodule`` should document for ``module``, in source order.

    Functions and classes count when ``module`` defines them (re-exports are documented where they are
    defined), data when the source gives it a ``#:`` comment; ``__all__``, when present, limits both.
    """
    from sphinx.pycode import ModuleAnalyzer

    analyzer = ModuleAnalyzer.for_module(module.__name__)
    attr_docs = {name for (scope, name) in analyzer.find_attr_docs() if scope == ""}
    order = analyzer.tagorder
    allowed = set(getattr(module, "__all__", None) or dir(module))
    names = []
    for name in dir(module):
        if name.startswith("_") or name not in allowed:
            continue
        obj = getattr(module, name)
        defined_here = getattr(obj, "__module__", None) == module.__name__ and (
            inspect.isclass(obj) or inspect.isfunction(obj) or hasattr(obj, "py_func"))
        if defined_here or name in attr_docs:
            names.append(name)
    return sorted(names, key=lambda n: order.get(n, len(order)))


class ApiDirective(SphinxDirective):
    """``topicflow-api PACKAGE``: document PACKAGE and its public modules, one section each."""

    required_arguments = 1
    option_spec: ClassVar[dict[str, Any]] = {"no-recursive": directives.flag}

    def run(self) -> list[nodes.Node]:
        if not isinstance(self.state, RSTState):
            raise self.error("topicflow-api writes reStructuredText: use it inside an eval-rst block in markdown")
        package = self.arguments[0]
        modules = [package] if "no-recursive" in self.options else public_modules(package)
        reexported = top_level_names()
        # The package itself goes under the page's title; its modules follow, one section each.
        lines = self._module_lines(package, reexported)
        if len(modules) > 1:
            # Relative to the package, the current module here.
            lines += [".. autosummary::", ""] + [f"   {m[len(package) + 1:]}" for m in modules[1:]] + [""]
        for name in modules[1:]:
            lines += [name, "-" * len(name), ""] + self._module_lines(name, reexported)
        mark_regenerated(self.env)
        return self._parse(lines)

    def _module_lines(self, name: str, reexported: dict[str, str]) -> list[str]:
        module = importlib.import_module(name)
        members = [m for m in documented_members(module) if f"{name}.{m}" not in reexported]
        moved = [f":class:`{reexported[key]}`" for key in reexported if key.rsplit(".", 1)[0] == name]
        lines = [f".. automodule:: {name}", ""]
        if moved:
            lines += [f"Documented at the top level: {', '.join(moved)}.", ""]
        exported = package_exports(module)
        if exported:
            names = ", ".join(f":obj:`{public} <{defined}>`" for public, defined in exported)
            lines += [f"Importable from ``{name}``: {names} (each documented in its module below).", ""]
        if members:
            lines += [".. autosummary::", "   :nosignatures:", ""] + [f"   {m}" for m in members] + [""]
        for member in members:
            kind = member_kind(getattr(module, member))
            lines += [f".. auto{kind}:: {name}.{member}"] + (["   :members:"] if kind == "class" else []) + [""]
        return lines

    def _parse(self, lines: list[str]) -> list[nodes.Node]:
        node = nodes.section()
        node.document = self.state.document
        nested_parse_with_titles(self.state, StringList(lines, source=f"<topicflow-api {self.arguments[0]}>"), node)
        return node.children


class ExportsDirective(ApiDirective):
    """``topicflow-exports PACKAGE``: the package's docstring and every name of its ``__all__``, under that name.

    For ``topicflow`` itself: ``topicflow.LDA`` is documented as ``topicflow.LDA`` (with the methods it
    inherits), and :class:`ApiDirective` skips it in ``topicflow.api.lda``.
    """

    option_spec: ClassVar[dict[str, Any]] = {}

    def run(self) -> list[nodes.Node]:
        if not isinstance(self.state, RSTState):
            raise self.error("topicflow-exports writes reStructuredText: use it inside an eval-rst block in markdown")
        package = self.arguments[0]
        module = importlib.import_module(package)
        names = [n for n in module.__all__ if not n.startswith("_")]
        lines = [f".. automodule:: {package}", "", ".. autosummary::", "   :nosignatures:", ""]
        lines += [f"   {name}" for name in names] + [""]
        for name in names:
            kind = member_kind(getattr(module, name))
            lines += [f".. auto{kind}:: {package}.{name}"]
            lines += ["   :members:", "   :inherited-members:"] if kind == "class" else []
            lines.append("")
        mark_regenerated(self.env)
        return self._parse(lines)


def package_exports(module: ModuleType) -> list[tuple[str, str]]:
    """Return ``(public name, defining name)`` for the names a package's ``__all__`` takes from its modules."""
    out = []
    for name in getattr(module, "__all__", ()):
        obj = getattr(module, name)
        defined_in, own_name = getattr(obj, "__module__", None) or "", getattr(obj, "__name__", None)
        if defined_in.startswith(module.__name__ + ".") and isinstance(own_name, str):
            out.append((f"{module.__name__}.{name}", f"{defined_in}.{own_name}"))
    return out


def member_kind(obj: Any) -> str:
    """Return the autodoc directive suffix for ``obj``: ``class``, ``function`` or ``data``.

    Type aliases (``Problem = tuple[str, str]``, ``Literal[...]``) are data, not classes, although
    ``inspect.isclass`` may say otherwise for a generic alias.
    """
    if isinstance(obj, type) and not isinstance(obj, types.GenericAlias):
        return "class"
    if inspect.isfunction(obj) or hasattr(obj, "py_func"):
        return "function"
    return "data"


def mark_regenerated(env: Any) -> None:
    """Mark the current page as generated from the code, so every build reads it again (see :func:`outdated`)."""
    env.metadata[env.docname]["topicflow_generated"] = True


def outdated(app: Sphinx, env: Any, added: set[str], changed: set[str], removed: set[str]) -> list[str]:
    """Return the pages generated from the code: a new module or command changes them without touching them."""
    return [doc for doc, meta in env.metadata.items() if meta.get("topicflow_generated") and doc not in removed]


GLOSSARY = re.compile(r"^Glossary\b.*:$")
#: A line that starts a reference: "Authors (year)." (a line that does not continues the one before).
REFERENCE_START = re.compile(r"^\S[^()]*\(\d{4}[a-z]?\)")


def format_module_docstring(app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    """Turn a module docstring's plain-text layout into reStructuredText (numpydoc leaves modules alone).

    Module docstrings are written for ``help(module)``. A ``Glossary:`` block (one indented entry a
    line, continuation lines indented further) becomes a bullet list; a numpydoc section
    (``References`` over a dashed line) becomes a rubric instead of a section title, which would break
    the page's outline, and its references become list items. The text is unchanged.
    """
    if what != "module":
        return
    lines[:] = _sections_as_rubrics(_glossary_as_list(lines))


def _glossary_as_list(lines: list[str]) -> list[str]:
    out, i = [], 0
    while i < len(lines):
        out.append(lines[i])
        i += 1
        if not GLOSSARY.match(out[-1]) or i == len(lines) or not lines[i].startswith(" "):
            continue
        indent, entries = len(lines[i]) - len(lines[i].lstrip()), []
        while i < len(lines) and lines[i].startswith(" ") and lines[i].strip():
            depth = len(lines[i]) - len(lines[i].lstrip())
            if depth == indent:
                entries.append(lines[i].strip())
            else:
                entries[-1] += " " + lines[i].strip()
            i += 1
        out += [""] + [f"* {entry}" for entry in entries] + [""]
    return out


def _sections_as_rubrics(lines: list[str]) -> list[str]:
    out: list[str] = []
    section = None
    for i, line in enumerate(lines):
        if re.fullmatch(r"-{3,}", line) and out and out[-1].strip():
            section = out.pop().strip()
            out += [f".. rubric:: {section}", ""]
        elif section == "References" and line.strip():
            if REFERENCE_START.match(line) or not out[-1].startswith(("* ", "  ")):
                out.append(f"* {line.strip()}")
            else:
                out.append(f"  {line.strip()}")
        else:
            out.append(line)
    return out


def keep_autodoc_signature(app: Sphinx, what: str, name: str, obj: Any, options: Any, signature: str | None,
                           return_annotation: str | None) -> tuple[str | None, str | None]:
    """Keep autodoc's own signature (a result here stops numpydoc's ``mangle_signature``).

    numpydoc re-renders signatures as plain strings: annotations such as ``list[dict[str, Any]]`` are then
    split at their commas, and a type alias (``tuple[str, str]``) fails to document at all. A dataclass
    field's ``default_factory`` shows as ``<factory>``, which is not Python and makes Sphinx fall back to
    the same comma splitting: it is shown as ``...`` instead.
    """
    if signature is not None:
        signature = signature.replace("<factory>", "...")
    return signature, return_annotation


# --- CLI page --------------------------------------------------------------------------------------------

def command_help(command: click.Command, path: list[str], parent: click.Context | None) -> list[tuple[str, str]]:
    """Return ``[(full command name, help text)]`` for ``command`` and, for a group, every subcommand below it."""
    ctx = click.Context(command, info_name=path[-1], parent=parent, terminal_width=HELP_WIDTH,
                        max_content_width=HELP_WIDTH)
    out = [(" ".join(path), command.get_help(ctx))]
    if isinstance(command, click.Group):
        for sub in command.list_commands(ctx):
            subcommand = command.get_command(ctx, sub)
            if subcommand is not None and not subcommand.hidden:
                out += command_help(subcommand, [*path, sub], ctx)
    return out


class CliDirective(SphinxDirective):
    """``topicflow-cli MODULE:GROUP [--prog NAME]``: click's help text for the group and each command."""

    required_arguments = 1
    option_spec: ClassVar[dict[str, Any]] = {"prog": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        module_name, _, attr = self.arguments[0].partition(":")
        module = importlib.import_module(module_name)
        group = getattr(module, attr)
        prog = self.options.get("prog", "topicflow")
        mark_regenerated(self.env)
        sections: list[nodes.Node] = []
        for i, (name, text) in enumerate(command_help(group, [prog], None)):
            if i == 0:
                # The group's own help comes first, under the page's title.
                sections.append(nodes.literal_block(text, text, language="text"))
                continue
            section = nodes.section(ids=[nodes.make_id(name)], names=[nodes.fully_normalize_name(name)])
            section += nodes.title(name, "", nodes.literal(name, name))
            section += nodes.literal_block(text, text, language="text")
            self.state.document.note_implicit_target(section, section)
            sections.append(section)
        return sections


# --- notebooks -------------------------------------------------------------------------------------------

def set_notebook_parameters(app: Sphinx, docname: str, source: list[str]) -> None:
    """Replace the ``parameters`` cell of notebook ``docname`` with its entry of ``topicflow_notebook_parameters``."""
    if not str(app.env.doc2path(docname)).endswith(".ipynb"):
        return
    notebook = nbformat.reads(source[0], as_version=4)
    cells = [c for c in notebook.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    name = docname.rsplit("/", 1)[-1]
    parameters = app.config.topicflow_notebook_parameters.get(name)
    if not cells:
        return
    if parameters is None:
        logger.warning(f"notebook {docname!r} has a 'parameters' cell but no entry in topicflow_notebook_parameters "
                       "(docs/conf.py): add its docs-size values so the build stays fast",
                       location=docname, type="topicflow", subtype="notebook")
        return
    cells[0].source = parameters.strip() + "\n"
    source[0] = nbformat.writes(notebook)


# --- links -----------------------------------------------------------------------------------------------

def resolve_object(target: str, module: str | None, cls: str | None) -> Any:
    """Return the ``topicflow`` object ``target`` names (absolute, or relative to ``module``/``cls``), or None."""
    scopes = [module, f"{module}.{cls}"] if module and cls else [module] if module else []
    # A class documented under a re-exported name (topicflow.Corpus) refers to names of its own module.
    owner = _import_dotted(scopes[-1]) if scopes else None
    if inspect.isclass(owner) and owner.__module__ != module:
        scopes += [owner.__module__, f"{owner.__module__}.{owner.__qualname__}"]
    for dotted in [target] + [f"{scope}.{target}" for scope in reversed(scopes)]:
        obj = _import_dotted(dotted) if dotted.startswith("topicflow") else None
        if obj is not None:
            return obj
    return None


def _import_dotted(dotted: str) -> Any:
    """Return the object a dotted name designates (a module, or attributes below one), or None."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for i, attr in enumerate(parts[cut:], start=cut):
            if hasattr(obj, attr):
                obj = getattr(obj, attr)
            elif i == len(parts) - 1 and attr in getattr(obj, "__annotations__", {}):
                # A dataclass field without a class attribute (``field(default_factory=...)``).
                return AnnotatedField(obj, attr)
            else:
                return None
        return obj
    return None


def redirect_repository_pages(app: Sphinx, doctree: nodes.document) -> None:
    """Point markdown links to repository files that are pages (``topicflow_repository_pages``) at the page.

    MyST turns a link to a ``.md`` file into a reference to the document of that path, which for a file
    outside ``docs/`` (``../benchmarks/RESULTS.md``) does not exist; it is rewritten here, on reading,
    before MyST resolves it.
    """
    srcdir, repo = Path(app.srcdir), Path(app.confdir).resolve().parent
    for node in doctree.findall(addnodes.pending_xref):
        if node.get("reftype") != "myst" or node.get("refdomain") != "doc":
            continue
        target = node["reftarget"]
        if target in app.env.found_docs:
            continue
        path = (srcdir / target).resolve()
        for suffix in ("", ".md"):
            candidate = path.with_name(path.name + suffix)
            if candidate.is_relative_to(repo):
                page = app.config.topicflow_repository_pages.get(candidate.relative_to(repo).as_posix())
                if page is not None:
                    node["reftarget"] = page
                    break


class AnnotatedField:
    """A class attribute known only from the class's annotations (what :func:`_import_dotted` returns for it)."""

    def __init__(self, owner: type, name: str) -> None:
        self.__module__ = owner.__module__
        self.__qualname__ = f"{owner.__qualname__}.{name}"


def resolve_missing(app: Sphinx, env: Any, node: nodes.Element, contnode: nodes.Element) -> nodes.Node | None:
    """Handle ``missing-reference`` for Python objects: see the module docstring (undocumented internals)."""
    if node.get("refdomain") != "py":
        return None
    obj = resolve_object(node.get("reftarget", "").lstrip("."), node.get("py:module"), node.get("py:class"))
    if obj is None:
        return None
    # A name imported into the docstring's module (or only under TYPE_CHECKING) may be documented
    # under the module that defines it: link there, else show the name without a link.
    name = f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', '')}"
    probe = node.deepcopy()
    probe.attributes.pop("refspecific", None)
    found = env.get_domain("py").resolve_xref(env, node["refdoc"], app.builder, "obj", name, probe, contnode)
    # Without the xref class, so that a name without a link does not look like one.
    return found if found is not None else nodes.literal(contnode.astext(), contnode.astext())


def cache_numpydoc_template() -> None:
    """Make numpydoc compile its docstring template once per template loader instead of once per docstring.

    ``numpydoc.docscrape_sphinx.get_doc_object`` builds a jinja environment and compiles
    ``numpydoc_docstring.rst`` on every call; this replaces the function numpydoc's handlers call with one
    that does the same with the template it compiled the first time for that builder (kept on the builder)
    or for none.
    """
    import numpydoc.numpydoc
    from jinja2 import FileSystemLoader
    from jinja2.sandbox import SandboxedEnvironment
    from numpydoc import docscrape, docscrape_sphinx
    from sphinx.jinja2glue import BuiltinTemplateLoader

    if getattr(numpydoc.numpydoc.get_doc_object, "topicflow_cached", False):
        return
    templates: dict[None, Any] = {}  # the one without a builder (numpydoc's signature handler)
    template_dirs = [str(Path(docscrape_sphinx.__file__).parent / "templates")]

    def get_doc_object(obj: Any, what: str | None = None, doc: str | None = None,
                       config: dict[str, Any] | None = None, builder: Any = None) -> Any:
        template = templates.get(None) if builder is None else getattr(builder, "topicflow_numpydoc_template", None)
        if template is None:
            if builder is not None:
                loader: Any = BuiltinTemplateLoader()
                loader.init(builder, dirs=template_dirs)
            else:
                loader = FileSystemLoader(template_dirs)
            template = SandboxedEnvironment(loader=loader).get_template("numpydoc_docstring.rst")
            if builder is None:
                templates[None] = template
            else:
                builder.topicflow_numpydoc_template = template
        config = {} if config is None else config
        config["template"] = template
        return docscrape.get_doc_object(obj, what=what, doc=doc, config=config,
                                        class_doc=docscrape_sphinx.SphinxClassDoc,
                                        func_doc=docscrape_sphinx.SphinxFunctionDoc,
                                        obj_doc=docscrape_sphinx.SphinxObjDoc)

    get_doc_object.topicflow_cached = True  # type: ignore[attr-defined]
    numpydoc.numpydoc.get_doc_object = get_doc_object


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the directives and the event handlers."""
    cache_numpydoc_template()
    app.add_config_value("topicflow_notebook_parameters", {}, "env")
    app.add_config_value("topicflow_repository_pages", {}, "env")
    app.add_directive("topicflow-api", ApiDirective)
    app.add_directive("topicflow-exports", ExportsDirective)
    app.add_directive("topicflow-cli", CliDirective)
    app.connect("source-read", set_notebook_parameters)
    app.connect("missing-reference", resolve_missing)
    app.connect("doctree-read", redirect_repository_pages)
    app.connect("env-get-outdated", outdated)
    app.connect("autodoc-process-docstring", format_module_docstring, priority=400)
    app.connect("autodoc-process-signature", keep_autodoc_signature, priority=400)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
