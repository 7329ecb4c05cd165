"""A scratch ziti-lite: a throwaway database holding a copy of a network, where a plan for a
controller that cannot roll back (``--controller``) is rehearsed and its assertions checked
by ziti-lite's own API validation and policy engine before anything is written there."""

from __future__ import annotations

import secrets
import shutil
import tempfile
from pathlib import Path
from types import TracebackType

from .. import exchange
from ..app import create_app
from ..config import Settings
from .document import NetcodeError

SEEDED = ("edge-router-policies", "service-edge-router-policies")   # a new database's default policies


class Scratch:
    def __init__(self, document: dict[str, list[dict]]):
        self.dir = Path(tempfile.mkdtemp(prefix="ziti-lite-scratch-"))
        db = str(self.dir / "scratch.db")
        app = create_app(Settings(db=db, admin_password=secrets.token_urlsafe(18), edge_port=0))
        app.state.controller.store.close()
        self.api = exchange.LocalApi(db)
        try:
            # the copy must hold what the live network holds and nothing else
            for collection in SEEDED:
                for e in self.api.list(collection):
                    self.api.call("DELETE", f"/{collection}/{e['id']}")
            exchange.import_(self.api, document)
        except exchange.ExchangeError as e:
            self.close()
            raise NetcodeError(f"the live network could not be copied into a scratch ziti-lite: {e}") from None

    def close(self) -> None:
        self.api.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> Scratch:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
