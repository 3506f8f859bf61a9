"""Provides a Pygments lexer for jaxpr text, as `str(jaxpr)` prints it."""

from __future__ import annotations

from pygments.lexer import RegexLexer, bygroups
from pygments.token import (
    Comment,
    Keyword,
    Name,
    Number,
    Operator,
    Punctuation,
    String,
    Text,
    Whitespace,
)


class JaxprLexer(RegexLexer):
    """Keywords (lambda/let/in), variables, types like f32<host>[4,4],
    primitive names after `=`, params, literals."""

    name = "Jaxpr"
    aliases = ["jaxpr"]
    filenames: list[str] = []

    tokens = {
        "root": [
            (r"\s+", Whitespace),
            (r"\b(lambda|let|in)\b", Keyword),
            # variable with its type: a:f32[4,4]  or  _:f32[]
            (
                r"([A-Za-z_]\w*)(:)([a-z]+\d*(?:<\w+>)?\[[^\]]*\])",
                bygroups(Name.Variable, Punctuation, Keyword.Type),
            ),
            # the primitive applied by an equation: `= dot_general[`
            (r"(=)(\s+)([A-Za-z_]\w*)", bygroups(Operator, Whitespace, Name.Function)),
            # param names inside [...]: dimension_numbers=
            (r"([A-Za-z_]\w*)(=)", bygroups(Name.Attribute, Operator)),
            # a literal with its type: 2.0:f32[]
            (
                r"(-?\d[\d.e+-]*)(:)([a-z]+\d*\[[^\]]*\])",
                bygroups(Number, Punctuation, Keyword.Type),
            ),
            (r"-?\d[\d.e+-]*", Number),
            (r"'[^']*'|\"[^\"]*\"", String),
            (r"<[^>]*>", Comment),
            (r"[{}\[\](),;.]", Punctuation),
            (r"[A-Za-z_]\w*", Name),
            (r".", Text),
        ],
    }
