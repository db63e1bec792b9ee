"""The Graph Analyser: the analysis core, its CLI, GUI, reports and exporters.

Imported inside IPython (a Jupyter notebook), the package registers the rich displays of
profiles, analyses, comparisons and diffs, and ``analysis.plot`` (:mod:`analyser.notebook`).
"""

import sys as _sys

if "IPython" in _sys.modules:  # a notebook or an IPython shell, never the CLI
    import warnings as _warnings

    try:
        from analyser.notebook import enable as _enable

        _enable()
    except Exception as _exc:  # a display nicety: the analysis works without it
        _warnings.warn(
            f"analyser: the notebook displays could not be registered ({_exc}); "
            "analyses still work, shown as plain text.",
            stacklevel=2,
        )
