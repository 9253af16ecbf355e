"""Training recipes the skorch nets share: augmentation, mixed precision,
per-epoch seeding and checkpoints that resume."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import json
import os
from contextlib import nullcontext
from pathlib import Path

import torch
from skorch.callbacks import Callback

from sksign._compat import InvalidParameterError
from sksign.estimators import _rng
from sksign.nn.layers.augment import random_crop_flip

__all__ = ["EpochCheckpoint", "TrainingRecipeMixin"]

#: The files of a checkpoint folder (skorch's save_params arguments).
_CHECKPOINT_FILES = {
    "f_params": "params.pt",
    "f_optimizer": "optimizer.pt",
    "f_history": "history.json",
}
_MARKER = "sksign_checkpoint.json"


class EpochCheckpoint(Callback):
    """Save the weights, optimizer state and history after every epoch.

    The files go to ``net.checkpoint_dir`` (``params.pt``, ``optimizer.pt``,
    ``history.json`` and ``sksign_checkpoint.json``, each written to a
    temporary name first and then renamed, so a run killed while writing
    leaves the previous epoch's checkpoint whole). Added by the nets when
    ``checkpoint_dir`` is set; :meth:`TrainingRecipeMixin._resume` reads it.

    Examples
    --------
    >>> import tempfile
    >>> import numpy as np
    >>> from sksign.estimators import HTAFNetClassifier
    >>> X, y = np.random.RandomState(0).rand(20, 3), [0, 1] * 10
    >>> folder = tempfile.mkdtemp()
    >>> net = HTAFNetClassifier((4,), max_epochs=2, checkpoint_dir=folder,
    ...                         random_state=0).fit(X, y)
    >>> sorted(p.name for p in __import__("pathlib").Path(folder).iterdir())
    ['history.json', 'optimizer.pt', 'params.pt', 'sksign_checkpoint.json']
    """

    def on_epoch_end(self, net, **kwargs):
        """Write the checkpoint of the epoch that ended.

        Parameters
        ----------
        net : skorch.NeuralNet
            The net being trained.
        **kwargs : dict
            Ignored.
        """
        folder = Path(net.checkpoint_dir)
        folder.mkdir(parents=True, exist_ok=True)
        tmp = {key: folder / f".{name}.tmp" for key, name in _CHECKPOINT_FILES.items()}
        net.save_params(**{key: str(path) for key, path in tmp.items()})
        for key, path in tmp.items():
            os.replace(path, folder / _CHECKPOINT_FILES[key])
        marker = folder / f".{_MARKER}.tmp"
        marker.write_text(
            json.dumps({"epochs": len(net.history), "estimator": type(net).__name__})
        )
        os.replace(marker, folder / _MARKER)


class TrainingRecipeMixin:
    """``augment``, ``mixed_precision`` and ``checkpoint_dir`` of the nets.

    - ``augment="crop_flip"``: each training batch of images (the net's
      ``input_shape_``) is padded by 4, randomly cropped back and mirrored
      left-right at random (:func:`sksign.nn.layers.augment.random_crop_flip`); a
      callable ``augment(images) -> images`` on ``(N, C, H, W)`` tensors
      replaces it.
    - ``mixed_precision=True``: the training forward and loss run under
      ``torch.autocast`` in bfloat16 on the net's device (no gradient scaler
      is needed for bfloat16).
    - ``channels_last=True``: on a CUDA device, the module's 4-D weights
      (convolutions) are kept in the ``channels_last`` memory format once the
      module is on its device, so its convolutions run in NHWC. On the CPU
      the layout stays NCHW: torch 2.13's CPU backward of a strided 1x1
      convolution in channels_last corrupts memory with few channels
      (reproduced with a single ``nn.Conv2d(2, 4, 1, stride=2)``).
    - ``checkpoint_dir``: an :class:`EpochCheckpoint` after every epoch, and
      ``fit`` resumes from the folder's checkpoint when there is one: it loads
      the weights, the optimizer state and the history, and trains the
      remaining ``max_epochs - len(history_)`` epochs. With ``random_state``
      set, the batch order, dropout and augmentation of epoch ``e`` depend only
      on ``(random_state, e)``, so a resumed fit ends with the same weights as
      an uninterrupted one.

    Examples
    --------
    >>> from sksign.estimators import HTAFNetClassifier
    >>> from sksign.estimators._recipes import TrainingRecipeMixin
    >>> isinstance(HTAFNetClassifier(), TrainingRecipeMixin)
    True
    """

    # -- seeding per epoch ------------------------------------------------------
    def on_epoch_begin(self, net, dataset_train=None, dataset_valid=None, **kwargs):
        """skorch's epoch start, then the epoch's own seeds.

        Parameters
        ----------
        net : skorch.NeuralNet
            This net.
        dataset_train, dataset_valid : Dataset or None
            The epoch's data sets.
        **kwargs : dict
            Passed to skorch.
        """
        super().on_epoch_begin(
            net, dataset_train=dataset_train, dataset_valid=dataset_valid, **kwargs
        )
        seed = getattr(self, "_rng_seed", None)
        if seed is None:
            return
        epoch = len(self.history) - 1
        generator = getattr(self, "_train_generator", None)
        if generator is not None:
            _rng.reseed(generator, _rng.stream_seed(seed, "epoch_shuffle", epoch))
        # inside the net's forked RNG (NetBase._training_rng): dropout and
        # augmentation of this epoch
        _rng.seed_torch(_rng.stream_seed(seed, "epoch", epoch), device=self.device)

    # -- augmentation and mixed precision ---------------------------------------
    def _check_augment(self):
        augment = self.augment
        if augment is not None and augment != "crop_flip" and not callable(augment):
            raise InvalidParameterError(
                f"The 'augment' parameter of {type(self).__name__} must be None, "
                f"'crop_flip' or a callable on (N, C, H, W) tensors. Got "
                f"{augment!r} instead."
            )

    def _augment_rows(self, Xi):
        """The augmented batch, as flat rows again."""
        shape = getattr(self, "input_shape_", None)
        if shape is None:
            raise ValueError(
                f"augment={self.augment!r} needs images: fit {type(self).__name__} "
                "on X of shape (n_samples, channels, height, width), or give "
                "input_shape."
            )
        images = Xi.reshape(len(Xi), *shape)
        fn = random_crop_flip if self.augment == "crop_flip" else self.augment
        out = fn(images)
        if tuple(out.shape) != tuple(images.shape):
            raise ValueError(
                f"augment must keep the batch's shape {tuple(images.shape)}; "
                f"it returned {tuple(out.shape)}."
            )
        return out.reshape(Xi.shape)

    def torch_compile(self, module, name):
        """skorch's hook on each module once it is on its device: the
        ``channels_last`` layout first, then skorch's ``compile``.

        Parameters
        ----------
        module : nn.Module
            The module.
        name : str
            Its name ("module", "criterion").

        Returns
        -------
        nn.Module
        """
        if (
            getattr(self, "channels_last", False)
            and name == "module"
            and torch.device(self.device).type == "cuda"
        ):
            module = module.to(memory_format=torch.channels_last)
        return super().torch_compile(module, name=name)

    def _autocast(self):
        if not self.mixed_precision:
            return nullcontext()
        device = torch.device(self.device)
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16)

    def train_step_single(self, batch, **fit_params):
        """One training step with augmentation and mixed precision as set.

        Parameters
        ----------
        batch : tuple
            skorch's batch ``(X, y)``.
        **fit_params : dict
            Passed to the module's forward.

        Returns
        -------
        step : dict
            skorch's ``{"loss": ..., "y_pred": ...}``.
        """
        if self.augment is not None:
            Xi, yi = batch
            Xi = torch.as_tensor(Xi, device=self.device)
            batch = (self._augment_rows(Xi), yi)
        with self._autocast():
            return super().train_step_single(batch, **fit_params)

    # -- checkpoints ------------------------------------------------------------
    def _resume(self):
        """Load the checkpoint of ``checkpoint_dir``; the epochs left to train."""
        folder = Path(self.checkpoint_dir)
        marker = folder / _MARKER
        if not marker.exists():
            return self.max_epochs
        info = json.loads(marker.read_text())
        if info.get("estimator") != type(self).__name__:
            raise ValueError(
                f"checkpoint_dir={str(folder)!r} holds a checkpoint of "
                f"{info.get('estimator')!r}, not of {type(self).__name__}; use "
                "another folder."
            )
        files = {key: str(folder / name) for key, name in _CHECKPOINT_FILES.items()}
        self.load_params(**files)
        return max(0, self.max_epochs - len(self.history_))
