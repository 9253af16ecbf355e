"""Report code behind ``python -m sksign demo`` and ``python -m sksign reproduce``.

A private package: the library never imports it. It builds reports out of the
public pieces of sksign (``sksign.estimators``, ``sksign.transformers``,
``sksign.metrics``, ``sksign.nn``, ``sksign.datasets``) and writes Markdown,
CSV and PNG files.

- ``demo``: :func:`run_demo`; its sections in ``demo_step_nets`` (1, 2, 6)
  and ``demo_sign_codes`` (3-5), its settings in ``demo_setup``.
- ``reproduce``: :func:`run_reproduce`; the papers' runners in
  ``signcode_paper`` and ``htaf_paper``, their nets and run-time estimate in
  ``fitting``, the papers' numbers and the settings in ``papers``.
- ``tables``: cell, Markdown and CSV formatting; ``_common``: the data split,
  the report folder, optional pieces, progress bars; ``plots``: the figures
  (matplotlib, optional).
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause
