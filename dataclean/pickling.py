"""Objects that hold a loaded model (a fastText model, a linear scorer's arrays) and must still be picklable:
the executors send stages to worker processes."""
from __future__ import annotations


class ReloadsModel:
    """Pickled without its loaded ``_model``: the copy in another process calls :meth:`_load_model` (which
    reads the model file again) as it is unpickled, so a bad file fails there at once, naming the file."""

    def _load_model(self) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_model", None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._load_model()
