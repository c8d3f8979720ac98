"""BLAKE3 (hash mode, 32-byte output) in pure Python.

The daemon names its sockets and mount records after the BLAKE3 hash of a path
(``RUNTIME/m-<16 hex of blake3(mountpoint)>.json``, see
``src/control/registry.rs``); the standard library has no BLAKE3, so the client
carries this small implementation of the reference algorithm. It is slow (pure
Python) and meant for short inputs such as paths, and for optional checks of
file contents read with :meth:`treefork.Session.show_file`.
"""

from typing import List, Tuple

_M = 0xFFFFFFFF
_IV = (
    0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A,
    0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19,
)
_PERM = (2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8)
_CHUNK_START, _CHUNK_END, _PARENT, _ROOT = 1, 2, 4, 8
_CHUNK_LEN, _BLOCK_LEN = 1024, 64


def _g(s: List[int], a: int, b: int, c: int, d: int, x: int, y: int) -> None:
    s[a] = (s[a] + s[b] + x) & _M
    t = s[d] ^ s[a]
    s[d] = ((t >> 16) | (t << 16)) & _M
    s[c] = (s[c] + s[d]) & _M
    t = s[b] ^ s[c]
    s[b] = ((t >> 12) | (t << 20)) & _M
    s[a] = (s[a] + s[b] + y) & _M
    t = s[d] ^ s[a]
    s[d] = ((t >> 8) | (t << 24)) & _M
    s[c] = (s[c] + s[d]) & _M
    t = s[b] ^ s[c]
    s[b] = ((t >> 7) | (t << 25)) & _M


def _compress(cv: List[int], m: List[int], counter: int, block_len: int, flags: int) -> List[int]:
    s = list(cv) + list(_IV[:4]) + [counter & _M, (counter >> 32) & _M, block_len, flags]
    m = list(m)
    for r in range(7):
        _g(s, 0, 4, 8, 12, m[0], m[1])
        _g(s, 1, 5, 9, 13, m[2], m[3])
        _g(s, 2, 6, 10, 14, m[4], m[5])
        _g(s, 3, 7, 11, 15, m[6], m[7])
        _g(s, 0, 5, 10, 15, m[8], m[9])
        _g(s, 1, 6, 11, 12, m[10], m[11])
        _g(s, 2, 7, 8, 13, m[12], m[13])
        _g(s, 3, 4, 9, 14, m[14], m[15])
        if r < 6:
            m = [m[i] for i in _PERM]
    for i in range(8):
        s[i] ^= s[i + 8]
        s[i + 8] ^= cv[i]
    return s


def _words(block: bytes) -> List[int]:
    block = block.ljust(_BLOCK_LEN, b"\0")
    return [int.from_bytes(block[i : i + 4], "little") for i in range(0, _BLOCK_LEN, 4)]


# An output not yet compressed: (cv, block words, counter, block length, flags).
_Output = Tuple[List[int], List[int], int, int, int]


def _chunk_output(chunk: bytes, counter: int) -> _Output:
    cv = list(_IV)
    blocks = [chunk[i : i + _BLOCK_LEN] for i in range(0, len(chunk), _BLOCK_LEN)] or [b""]
    for i, block in enumerate(blocks):
        flags = _CHUNK_START if i == 0 else 0
        if i == len(blocks) - 1:
            return (cv, _words(block), counter, len(block), flags | _CHUNK_END)
        cv = _compress(cv, _words(block), counter, _BLOCK_LEN, flags)[:8]
    raise AssertionError("unreachable")


def _cv(out: _Output) -> List[int]:
    cv, m, counter, n, flags = out
    return _compress(cv, m, counter, n, flags)[:8]


def _parent(left: List[int], right: List[int]) -> _Output:
    return (list(_IV), left + right, 0, _BLOCK_LEN, _PARENT)


def blake3(data: bytes) -> bytes:
    """The 32-byte BLAKE3 hash of ``data``."""
    chunks = [data[i : i + _CHUNK_LEN] for i in range(0, len(data), _CHUNK_LEN)] or [b""]
    stack: List[List[int]] = []
    for n, chunk in enumerate(chunks[:-1]):
        cv = _cv(_chunk_output(chunk, n))
        total = n + 1
        while total & 1 == 0:
            cv = _cv(_parent(stack.pop(), cv))
            total >>= 1
        stack.append(cv)
    out = _chunk_output(chunks[-1], len(chunks) - 1)
    while stack:
        out = _parent(stack.pop(), _cv(out))
    cv, m, counter, n, flags = out
    words = _compress(cv, m, counter, n, flags | _ROOT)[:8]
    return b"".join(w.to_bytes(4, "little") for w in words)


def blake3_hex(data: bytes) -> str:
    """The BLAKE3 hash of ``data`` as 64 lowercase hex digits."""
    return blake3(data).hex()
