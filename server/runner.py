"""``skiff`` as a process: logging, uvloop, the pid file and nats-server's signals.

SIGTERM / SIGINT stop cleanly (stores flushed), SIGUSR2 enters lame-duck mode, SIGHUP reloads the configuration
file (log levels and authorization; other changes need a restart, as several do in nats-server).  The process that
runs this is the server itself: there is no wrapper child, so a harness's SIGKILL stops it.
"""
from __future__ import annotations

import asyncio
import gc
import os
import signal
import sys

from . import log as logmod
from .options import ServerOptions


def run(options: ServerOptions) -> int:
    logmod.configure(
        debug=options.debug,
        trace=options.trace,
        logtime=options.logtime,
        log_file=options.log_file,
        json_logs=getattr(options, "log_json", False),
    )
    try:
        import uvloop  # noqa: F401

        runner = uvloop.run
    except ImportError:  # pragma: no cover - uvloop is a runtime dependency on every supported platform
        runner = asyncio.run
    try:
        return runner(_main(options))
    except KeyboardInterrupt:  # pragma: no cover
        return 0


async def _main(options: ServerOptions) -> int:
    from .core.server import Server

    log = logmod.get_logger("skiff")
    server = Server(options)
    try:
        await server.start()
    except OSError as e:
        log.error(f"Error listening on port: {options.host}:{options.port}, {e.strerror or e}")
        return 1
    except Exception as e:  # configuration problems found at start (TLS files, store dir)
        log.error(f"Error starting server: {e}")
        return 1
    # Everything allocated at start-up (modules, config models, recovered indexes) lives for the whole run: move it
    # out of the collector's reach, and collect the young generation less often.  Full collections over a large
    # heap are what would otherwise show up as request/reply p99 spikes.
    gc.freeze()
    gc.set_threshold(50_000, 50, 100)
    if server.http_port:  # started first: harnesses poll /varz to know the server is ready
        log.info(f"Starting http monitor on {options.http_host or options.host}:{server.http_port}")
    log.info(f"Listening for client connections on {options.host}:{server.port}")
    log.info("Server is ready")
    if options.pid_file:
        with open(options.pid_file, "w") as f:
            f.write(str(os.getpid()))
    loop = asyncio.get_running_loop()

    def stop(signame: str) -> None:
        log.info(f'Trapped "{signame}" signal')
        asyncio.ensure_future(server.shutdown())

    loop.add_signal_handler(signal.SIGTERM, stop, "terminated")
    loop.add_signal_handler(signal.SIGINT, stop, "interrupt")
    loop.add_signal_handler(signal.SIGUSR2, lambda: asyncio.ensure_future(server.lame_duck_mode()))
    loop.add_signal_handler(signal.SIGHUP, lambda: _reload(server, log))
    await server.wait_stopped()
    if options.pid_file:
        try:
            os.unlink(options.pid_file)
        except OSError:
            pass
    return 0


def _reload(server, log) -> None:
    """SIGHUP: re-read the config file and apply what can change at run time."""
    path = server.options.config_file
    if not path:
        log.info("Reloaded: no configuration file")
        return
    try:
        from .options import options_from_config

        new = options_from_config(path)
    except Exception as e:
        log.error(f"Failed to reload server configuration: {e}")
        return
    from .core.auth import Auth

    cur = server.options
    changes = {k: getattr(new, k) for k in ("debug", "trace", "logtime", "max_payload", "ping_interval", "ping_max")}
    server.options = cur.model_copy(update=changes)
    server.auth = Auth(new)
    logmod.configure(debug=new.debug, trace=new.trace, logtime=new.logtime, log_file=cur.log_file,
                     json_logs=getattr(cur, "log_json", False))
    for client in list(server.clients.values()):
        client._update_pub_path()  # trace may have changed
    log.info("Reloaded server configuration")
