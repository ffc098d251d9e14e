"""Type stubs of the native module (crates/tiercache-py). Use the functions of the
``tiercache`` package, which give these their documented signatures."""

from typing import Callable, Optional, Tuple, Union

class TiercacheError(Exception): ...
class TraceError(TiercacheError): ...
class ConfigError(TiercacheError): ...

def sim_json(trace: str, options_json: str) -> str: ...
def read_trace(
    path: str,
    format: str = "auto",
    csv_spec: Optional[str] = None,
    block_size: Optional[str] = None,
    skip_bad: bool = False,
    limit: Optional[int] = None,
) -> Tuple[bytearray, bytearray, bytearray, bytearray, int, str]: ...
def write_trace(
    path: str, format: str, time: bytes, key: bytes, size: bytes, op: bytes
) -> int: ...

class Cache:
    def __init__(
        self,
        options_json: str,
        block_size: str = "4KiB",
        slow_path: Optional[str] = None,
        flash_path: Optional[str] = None,
        shards: int = 16,
        keys: str = "int",
        max_value: Optional[str] = None,
        sync_interval: Optional[str] = None,
    ) -> None: ...
    def get(self, key: Union[int, bytes]) -> Optional[bytes]: ...
    def put(self, key: Union[int, bytes], value: bytes) -> bool: ...
    def fetch(self, key: Union[int, bytes], load: Callable[[], bytes]) -> bytes: ...
    def delete(self, key: Union[int, bytes]) -> None: ...
    def stats_json(self) -> str: ...
    @property
    def block_size(self) -> int: ...
    @property
    def max_value(self) -> int: ...

def sweep_json(
    trace: str,
    common_json: str,
    cells_json: str,
    threads: int = 0,
    done: Optional[Callable[[], object]] = None,
) -> str: ...
