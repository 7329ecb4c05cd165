"""The admin console (ZAC) at ``/zac/``, as the controller's ``zac`` web binding serves it.

``ziti-lite serve --zac DIR`` serves a built ZAC from DIR on the API's HTTPS port: ``/zac/...``
is a file of DIR, or else ``index.html`` (a single-page app: a deep link such as
``/zac/identities`` loads the app, whose router shows the page); ``/assets/...`` is DIR's
``assets`` folder, which the console also requests from the root. Anything else, and a missing
asset, goes on to the APIs.
"""

from __future__ import annotations

import os
import stat

from starlette.exceptions import HTTPException
from starlette.responses import RedirectResponse
from starlette.staticfiles import StaticFiles

from .api import envelope as env
from .errors import ApiError, NotFound

PREFIX = "/zac"


class Console:
    def __init__(self, directory: str):
        self.directory = os.path.abspath(directory)
        self.files = StaticFiles(directory=self.directory, check_dir=True)
        index = os.path.join(self.directory, "index.html")
        if not os.path.isfile(index):
            raise ValueError(f"{directory} has no index.html: not a built console")

    def handles(self, path: str) -> bool:
        return path == PREFIX or path.startswith(PREFIX + "/") or path.startswith("/assets/")

    async def __call__(self, scope, receive, send, fallback) -> None:
        path = scope["path"]
        if path == PREFIX:
            scope["zl.status"] = 301
            return await RedirectResponse(PREFIX + "/", status_code=301)(scope, receive, send)
        if path.startswith("/assets/"):
            response = await self._file(path, scope)
            if response is None:
                return await fallback(scope, receive, send)   # the APIs answer 404
        else:
            response = await self._file(path[len(PREFIX):], scope)
            if response is None and scope["method"] in ("GET", "HEAD"):
                response = await self._index(scope)
        if response is None:
            response = env.error_response(ApiError("METHOD_NOT_ALLOWED") if scope["method"] not in ("GET", "HEAD")
                                          else NotFound())
        scope["zl.status"] = response.status_code   # for the access record (observe.py)
        await response(scope, receive, send)

    async def _file(self, path: str, scope):
        if not path.strip("/"):
            return None   # /zac/: the index
        try:
            return await self.files.get_response(os.path.normpath(os.path.join(*path.split("/"))), scope)
        except HTTPException:
            return None

    async def _index(self, scope):
        full, st = self.files.lookup_path("index.html")
        if st is None or not stat.S_ISREG(st.st_mode):
            return None
        response = self.files.file_response(full, st, scope)
        response.headers["cache-control"] = "no-cache"
        return response
