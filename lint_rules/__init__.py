"""fwdlint's analyzer: source -> facts -> project view -> rules -> diagnostics -> report or fix."""

__version__ = "0.1.0"
