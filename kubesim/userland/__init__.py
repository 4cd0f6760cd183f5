"""A userland per image for `kubectl exec`: the files, tools, shell and process table a container
of that image shows (images.py, fs.py, shell.py, tools.py) and what its network clients reach
(net.py). `run_exec` is the kubelet's entry point."""

from kubesim.userland.exec import Sandbox, oci_not_found, run_exec
from kubesim.userland.images import Userland, userland_of
from kubesim.userland.net import Answer, dial, dial_pod, http_answer

__all__ = ["Answer", "Sandbox", "Userland", "dial", "dial_pod", "http_answer", "oci_not_found", "run_exec", "userland_of"]
