"""One registry type for every kind of plug-in: rules, probes, output formats and engines. Each registers by
being a module in its package: `load()` imports every module of the registry's packages once, and importing a
module registers what it declares (`add`). A second item under the same key is an error, said once, here."""
from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class RegistryError(ValueError):
    """Two items under one key, or a malformed declaration: a programming error caught at import time."""


class Registry(Generic[T]):
    """Items of one kind (`what`: "rule", "probe", ...) by key, from the modules of `packages`."""

    def __init__(self, what: str, key: Callable[[T], str], packages: tuple[str, ...] = ()):
        self.what, self._key, self._packages = what, key, packages
        self._items: dict[str, T] = {}
        self._loaded = False

    def add(self, item: T, *, same: Callable[[T, T], bool] | None = None) -> T:
        """Register `item`. Its key taken already is an error, unless `same(old, new)` says it is the same item
        registered again (a module imported under a second name)."""
        name = self._key(item)
        old = self._items.get(name)
        if old is not None and not (same is not None and same(old, item)):
            raise RegistryError(f"{self.what} {name} is registered twice")
        self._items[name] = item
        return item

    def load(self) -> Registry[T]:
        """Import every module of the packages once: importing a module registers its items."""
        if not self._loaded:
            self._loaded = True
            for package in self._packages:
                module = importlib.import_module(package)
                for info in pkgutil.iter_modules(module.__path__):
                    importlib.import_module(f"{package}.{info.name}")
        return self

    def get(self, name: str) -> T | None:
        return self.load()._items.get(name)

    def __getitem__(self, name: str) -> T:
        return self.load()._items[name]

    def __contains__(self, name: object) -> bool:
        return name in self.load()._items

    def __iter__(self) -> Iterator[T]:
        return iter(self.load()._items.values())

    def __len__(self) -> int:
        return len(self.load()._items)

    def keys(self) -> list[str]:
        return list(self.load()._items)
