"""Many small texts kept compressed, with a dictionary learnt from the first of them.

The writer remembers every object it wrote (known.py) and the reconciler every pool's
status bodies (for explanations): at 65,000 nodes 140,000 texts of a few KB each, each
compressed on its own. One small text alone gives a compressor little to share, so zlib
keeps much of it and spends its CPU searching. These texts repeat one another's keys,
condition types, driver, device and attribute names: zstd with a dictionary learnt from
a sample of them makes each a fraction of zlib's size in a fraction of its time (figures:
bench/HISTORY.md).

The dictionary is learnt once, from the first texts packed (the first full sync's, or
the list's after a restart), so it knows the cluster's own names. Texts packed before
it stay readable: a zstd frame names the dictionary it needs (0 for none).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import zstandard

log = logging.getLogger(__name__)

DICT_BYTES = 16 << 10  # 64 KB learnt no better on the simulated world
SAMPLES = 1000
SAMPLE_BYTES = 4 << 20  # what may be held at most until the dictionary is learnt
LARGEST_SAMPLE = 64 << 10  # a huge object would crowd out the others' patterns


class Packer:
    """pack()/unpack() for one kind of text (one dictionary learnt per Packer).
    Not thread-safe: used from the event loop only."""

    def __init__(
        self,
        samples: int = SAMPLES,
        sample_bytes: int = SAMPLE_BYTES,
        dict_bytes: int = DICT_BYTES,
        level: int = 1,
    ) -> None:
        self.samples, self.sample_bytes = samples, sample_bytes
        self.dict_bytes, self.level = dict_bytes, level
        self._compress: Callable[[bytes], bytes] = zstandard.ZstdCompressor(level).compress
        self._readers: dict[int, Callable[[bytes], bytes]] = {
            0: zstandard.ZstdDecompressor().decompress
        }
        # None once the dictionary is learnt, or given up.
        self._sampled: list[bytes | bytearray | memoryview] | None = []
        self._held = 0
        self.dict_id = 0  # the dictionary new texts are packed with (0: none)

    def pack(self, data: bytes) -> bytes:
        if self._sampled is not None:
            self._sample(data)
        # A copy: zstandard hands back a bytes object that keeps the room of the
        # compression bound (about the text's size), not the frame's (a fifth of it).
        return memoryview(self._compress(data)).tobytes()

    def unpack(self, blob: bytes) -> bytes:
        return self._readers[zstandard.get_frame_parameters(blob).dict_id](blob)

    def _sample(self, data: bytes) -> None:
        assert self._sampled is not None
        if len(data) <= LARGEST_SAMPLE:
            self._sampled.append(data)
            self._held += len(data)
        if len(self._sampled) >= self.samples or self._held >= self.sample_bytes:
            self._learn()

    def _learn(self) -> None:
        sampled, self._sampled, self._held = self._sampled or [], None, 0
        try:
            learnt = zstandard.train_dictionary(self.dict_bytes, sampled)
        except zstandard.ZstdError as exc:
            # Too little or too uniform text to learn from: each text is packed alone,
            # as before the dictionary, which only costs memory.
            log.debug("no compression dictionary learnt", extra={"reason": str(exc)})
            return
        dict_id = learnt.dict_id()
        if dict_id == 0:  # 0 names "no dictionary" in a frame: it could not be told apart
            return
        self._compress = zstandard.ZstdCompressor(self.level, dict_data=learnt).compress
        self._readers[dict_id] = zstandard.ZstdDecompressor(dict_data=learnt).decompress
        self.dict_id = dict_id
        log.debug(
            "learnt a compression dictionary",
            extra={"samples": len(sampled), "bytes": len(learnt.as_bytes())},
        )
