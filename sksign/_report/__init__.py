"""Report code behind ``python -m sksign demo`` and ``python -m sksign reproduce``.

A private package: the library never imports it. It builds reports out of the
public pieces of sksign and writes Markdown, CSV and PNG files.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause
