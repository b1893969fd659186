"""JupyterHub for a Per Watt workshop room: one server, one shared environment, one shared password.

Start it from the repository folder (deploy/jupyterhub/README.md has the whole route):

    PERWATT_HUB_PASSWORD='a-room-password' .venv/bin/jupyterhub -f deploy/jupyterhub/jupyterhub_config.py

Everything a host may want to change is an environment variable, so this file stays as committed and the
tests (tests/test_hub.py) and the load test (perf/hub_load.py) run exactly it:

PERWATT_HUB_PASSWORD        the room's shared password, 8 characters or more (required)
PERWATT_HUB_USERS           comma-separated names allowed to log in (default: any name); with "local", the accounts
PERWATT_HUB_ADMIN           an admin user name, and PERWATT_HUB_ADMIN_PASSWORD (32 or more characters) for it
PERWATT_HUB_IP / _PORT      where students connect: 0.0.0.0:8000 by default (tests: 127.0.0.1 and a free port)
PERWATT_HUB_INTERNAL_PORT   first of two loopback ports for the hub's API and the proxy's API (8081, 8082)
PERWATT_HUB_STATE           folder for the database, cookie secret and proxy pid file (the current folder)
PERWATT_HUB_SPAWNER         "local" (default: system users, LocalProcessSpawner), "systemd" (systemdspawner,
                            enforces the limits), or "simple" (one Unix user for everyone: tests only)
PERWATT_HUB_HOMES           with "simple": the folder under which each student gets a home (/tmp/perwatt-hub)
PERWATT_HUB_MEM_LIMIT       per-student memory limit, e.g. 1.5G (default); PERWATT_HUB_CPU_LIMIT cores, e.g. 1
PERWATT_HUB_CULL_TIMEOUT    seconds idle before a student's server is stopped (default 3600), checked every
                            PERWATT_HUB_CULL_EVERY seconds (300); kernels idle PERWATT_HUB_KERNEL_CULL seconds (1200)
PERWATT_HUB_PROXY           the configurable-http-proxy binary (default: the one `make` installs in .venv/node)
PERWATT_HUB_API_TOKEN       registers a service "perwatt-admin" with this token (load test, smoke test, scripts)

Which limits are enforced: the spawner decides. LocalProcessSpawner and SimpleLocalProcessSpawner only pass
MEM_LIMIT and CPU_LIMIT to the server as environment variables (a resource-usage display can show them; nothing
stops a process that exceeds them). SystemdSpawner (PERWATT_HUB_SPAWNER=systemd) enforces both through the
unit's MemoryMax and CPUQuota; on Kubernetes, KubeSpawner enforces them as the pod's limits (z2jh-values.yaml).
"""

import os
import signal
import sys
from pathlib import Path

c = get_config()  # noqa: F821 - JupyterHub provides it when it loads this file

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
BIN = Path(sys.executable).parent  # the shared environment: the one JupyterHub itself runs in
env = os.environ.get

password = env("PERWATT_HUB_PASSWORD")
if not password:
    sys.exit("jupyterhub_config.py: set PERWATT_HUB_PASSWORD to the room's shared password (8 characters or more)")

state = Path(env("PERWATT_HUB_STATE", ".")).resolve()
state.mkdir(parents=True, exist_ok=True)
internal = int(env("PERWATT_HUB_INTERNAL_PORT", "8081"))

# --- Network: students reach the proxy; the hub and the proxy's API stay on loopback ---------------
c.JupyterHub.ip = env("PERWATT_HUB_IP", "0.0.0.0")
c.JupyterHub.port = int(env("PERWATT_HUB_PORT", "8000"))
c.JupyterHub.hub_bind_url = f"http://127.0.0.1:{internal}"
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{internal + 1}"
c.ConfigurableHTTPProxy.command = [env("PERWATT_HUB_PROXY", str(REPO / ".venv/node/node_modules/.bin/configurable-http-proxy"))]
c.ConfigurableHTTPProxy.pid_file = str(state / "jupyterhub-proxy.pid")
c.JupyterHub.db_url = f"sqlite:///{state / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(state / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(state / "jupyterhub.pid")
c.JupyterHub.cleanup_servers = True  # stopping the hub stops every student's server
c.JupyterHub.cleanup_proxy = True
# For HTTPS in a real room put a reverse proxy (Caddy, nginx) in front, or set ssl_cert and ssl_key here.

# --- Who may log in: one shared password for the room ----------------------------------------------
# Anyone with the password can log in under any name (including someone else's): fine for a workshop
# with no private data, not for coursework. Give each student a name they will remember (a seat number).
c.JupyterHub.authenticator_class = "shared-password"
c.SharedPasswordAuthenticator.user_password = password
users = [u.strip() for u in env("PERWATT_HUB_USERS", "").split(",") if u.strip()]
if users:
    c.Authenticator.allowed_users = set(users)  # e.g. the accounts made for LocalProcessSpawner
else:
    c.Authenticator.allow_all = True  # any name: with the "simple" or "systemd" spawner
admin = env("PERWATT_HUB_ADMIN")
if admin:
    c.Authenticator.admin_users = {admin}
    c.SharedPasswordAuthenticator.admin_password = env("PERWATT_HUB_ADMIN_PASSWORD")

# --- Each student's server: JupyterLab from the shared environment ---------------------------------
kind = env("PERWATT_HUB_SPAWNER", "local")
args = []
if kind == "simple":
    # Every server runs as the hub's own Unix user with a home under PERWATT_HUB_HOMES. No isolation
    # between students: tests and this machine's load test only.
    c.JupyterHub.spawner_class = "simple"
    c.SimpleLocalProcessSpawner.home_dir_template = str(Path(env("PERWATT_HUB_HOMES", "/tmp/perwatt-hub")) / "{username}")
    if os.geteuid() == 0:
        args.append("--allow-root")
elif kind == "systemd":
    # pip install jupyterhub-systemdspawner; one transient systemd unit per student, limits enforced.
    c.JupyterHub.spawner_class = "systemdspawner.SystemdSpawner"
    c.SystemdSpawner.dynamic_users = True  # no system accounts to create; homes under /var/lib/private
    c.SystemdSpawner.isolate_tmp = True
    c.SystemdSpawner.disable_user_sudo = True
elif kind == "local":
    # One Unix account per student (create them with `useradd`); the hub runs as root to switch to them.
    c.JupyterHub.spawner_class = "localprocess"
else:
    sys.exit(f"jupyterhub_config.py: PERWATT_HUB_SPAWNER={kind!r}; use local, systemd or simple")

c.Spawner.cmd = [str(BIN / "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
c.Spawner.mem_limit = env("PERWATT_HUB_MEM_LIMIT", "1.5G")
c.Spawner.cpu_limit = float(env("PERWATT_HUB_CPU_LIMIT", "1"))
c.Spawner.start_timeout = 180  # a full room logging in at once on few cores takes longer than the default 60 s
c.Spawner.http_timeout = 120
c.Spawner.env_keep = ["PATH", "LANG", "LC_ALL", "VIRTUAL_ENV", "PERWATT_HUB_RUN"]  # PERWATT_HUB_RUN: tests find their processes
c.Spawner.environment = {"PATH": f"{BIN}:/usr/local/bin:/usr/bin:/bin"}  # `jupyter`, `python` are the shared env's
c.JupyterHub.concurrent_spawn_limit = 40
c.JupyterHub.active_server_limit = int(env("PERWATT_HUB_MAX_SERVERS", "0"))  # 0: no limit; see the sizing guide

# --- Idle culling: servers as a hub service, kernels inside each server ----------------------------
# A hub started in the background by a script (`jupyterhub ... &` from a non-interactive shell) inherits
# SIGINT ignored, and so would the culler it starts; stopping the hub, which stops the culler with SIGINT
# first, would then wait out the spawner's 30 s interrupt_timeout before trying SIGTERM. With SIGINT back
# at Python's default here, the culler starts with it at its default too. (The hub installs its own SIGINT
# handler once it has started.)
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
c.JupyterHub.services = [{
    "name": "idle-culler",
    "command": [sys.executable, "-m", "jupyterhub_idle_culler",
                f"--timeout={int(env('PERWATT_HUB_CULL_TIMEOUT', '3600'))}",
                f"--cull-every={int(env('PERWATT_HUB_CULL_EVERY', '300'))}", "--concurrency=5"],
}]
c.JupyterHub.load_roles = [{
    "name": "idle-culler",
    "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"],
    "services": ["idle-culler"],
}]
kernel_cull = env("PERWATT_HUB_KERNEL_CULL", "1200")
c.Spawner.args = [*args, f"--MappingKernelManager.cull_idle_timeout={int(kernel_cull)}",
                  "--MappingKernelManager.cull_interval=120"]

token = env("PERWATT_HUB_API_TOKEN")
if token:
    c.JupyterHub.services.append({"name": "perwatt-admin", "api_token": token})
    c.JupyterHub.load_roles.append({
        "name": "perwatt-admin",
        "scopes": ["admin:users", "admin:servers", "tokens", "list:users", "read:users", "access:servers"],
        "services": ["perwatt-admin"],
    })
