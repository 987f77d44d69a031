# fabric-lab: two commands do everything on a fresh Debian 12 machine.
#   make lab    install what is missing, deploy the default lab, print how to use it
#   make test   same idempotent set-up, then lint and the whole test suite
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
LABCTL := $(VENV)/bin/labctl
DEFAULT_LAB ?= topologies/fpf-mini.yml
DEB_PACKAGES := frr iproute2 iputils-ping tcpdump iperf3 nftables iptables procps python3-venv \
	build-essential mininet
PYTEST_ARGS ?=

DOCKER_DEB_PACKAGES := docker.io mmdebstrap
# What only the tests need: headless Chromium looks at the HTML the lab draws.
TEST_DEB_PACKAGES := chromium
# The e2e suites that run on the docker runtime too (the rest are runtime-independent).
DOCKER_SUITES := tests/e2e/test_docker_runtime.py tests/e2e/test_clos.py tests/e2e/test_containerlab.py tests/e2e/test_sai_lab.py tests/e2e/test_fpf.py \
	tests/e2e/test_impair.py tests/e2e/test_rbb.py tests/e2e/test_ansible.py tests/e2e/test_platform.py tests/e2e/test_qos.py \
	tests/e2e/test_lifecycle.py::test_sigkill_at_random_points_then_destroy_leaves_nothing

.PHONY: lab test test-docker docker images destroy setup debs bench nightly lint docs clean

# Every engine shares one header (time, errors, TAP and packet-socket set-up).
ENGINE_H := harness/core/fl_engine.h
ENGINE_CFLAGS := -O2 -Wall -Wextra -Iharness/core
ENGINES := build/fl-impair build/fl-bfd build/fl-probe build/fl-srv6 build/fl-mergeable build/fl-port build/fl-rdma

setup: debs $(VENV)/.installed $(ENGINES)

# Installs only the Debian packages that are missing, so a ready machine pays nothing.
# Without recommends: mininet's would bring Open vSwitch, which no lab here uses.
debs:
	@missing=$$(for p in $(DEB_PACKAGES) $(EXTRA_DEBS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages: $$missing"; \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; \
	fi

$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,ops,docs]'
	@touch $@

# The C programs. Each build writes a temporary file of its own: on a fresh checkout, labs or
# tests starting at once all run these rules (harness/core/build.py), and a shared one raced.

# The userspace impairment engine; harness/links/impair/engine.py runs this rule on demand too.
build/fl-impair: harness/links/impair/fl_impair.c $(ENGINE_H)
	@mkdir -p build
	$(CC) $(ENGINE_CFLAGS) -o $@.$$$$.tmp $< && mv $@.$$$$.tmp $@

# A port's egress at line rate: queues, shared buffer, ECN, PFC (harness/nodes/port/).
build/fl-port: harness/nodes/port/fl_port.c $(ENGINE_H)
	@mkdir -p build
	$(CC) $(ENGINE_CFLAGS) -o $@.$$$$.tmp $< && mv $@.$$$$.tmp $@

# A host NIC's RDMA transport: RoCEv2 RC with DCQCN, and a multipath one (harness/nodes/rdma/).
build/fl-rdma: harness/nodes/rdma/fl_rdma.c $(ENGINE_H)
	@mkdir -p build
	$(CC) $(ENGINE_CFLAGS) -o $@.$$$$.tmp $< && mv $@.$$$$.tmp $@

# The BFD offload bfdd hands its sessions to (harness/nodes/bfd/offload.py).
build/fl-bfd: harness/nodes/bfd/fl_bfd.c $(ENGINE_H)
	@mkdir -p build
	$(CC) $(ENGINE_CFLAGS) -o $@.$$$$.tmp $< -lm && mv $@.$$$$.tmp $@

# The multi-plane host NIC's data-plane path check (harness/spray/probe.py).
build/fl-probe: harness/spray/fl_probe.c $(ENGINE_H)
	@mkdir -p build
	$(CC) $(ENGINE_CFLAGS) -o $@.$$$$.tmp $< && mv $@.$$$$.tmp $@

# The SAI dataplane's SRv6 path where the kernel has no seg6 (harness/nodes/switch/sai/srv6_engine.py).
build/fl-srv6: harness/nodes/switch/sai/fl_srv6.c $(ENGINE_H)
	@mkdir -p build
	$(CC) $(ENGINE_CFLAGS) -o $@.$$$$.tmp $< && mv $@.$$$$.tmp $@

# Runs a node's processes so KSM can merge their pages (harness/linux/ksm.py).
build/fl-mergeable: harness/linux/fl_mergeable.c
	@mkdir -p build
	$(CC) $(ENGINE_CFLAGS) -o $@.$$$$.tmp $< && mv $@.$$$$.tmp $@

lab: setup
	$(LABCTL) destroy -t $(DEFAULT_LAB)
	$(LABCTL) deploy $(DEFAULT_LAB)

# Only the lab `make lab` deployed: other labs on this host (other users', tests') are theirs.
destroy: setup
	$(LABCTL) destroy -t $(DEFAULT_LAB)

# No cache: a cached verdict once hid an import-order error that a fresh checkout (CI) saw.
lint: setup
	$(VENV)/bin/ruff check --no-cache .

# The manual as a site in build/site/; strict: a broken link or anchor, or a page missing from
# the navigation, fails the build (and so `make test`).
docs: setup
	$(VENV)/bin/mkdocs build --strict -q

# Unit tests as `nobody` first (they must need no root), then everything as root on the
# netns runtime, then the fabric suites again on the docker runtime.
test: setup lint docs
	@$(MAKE) --no-print-directory debs EXTRA_DEBS="$(TEST_DEB_PACKAGES)"
	bash tests/tools/unit-unprivileged.sh
	$(PY) -m pytest $(PYTEST_ARGS)
	$(MAKE) test-docker

test-docker: images
	FABRIC_LAB_RUNTIME=docker $(PY) -m pytest $(PYTEST_ARGS) $(DOCKER_SUITES)

# A dockerd for the docker runtime, when none runs. Ours is started without its iptables
# rules, bridge and ip_forward switch: lab containers use `--network none`, so the host's
# firewall, links and sysctls stay as they were (a default dockerd sets FORWARD to DROP).
docker: EXTRA_DEBS := $(DOCKER_DEB_PACKAGES)
docker: setup
	@docker info >/dev/null 2>&1 || { \
	  echo "starting dockerd (log: /var/log/fabric-lab-dockerd.log)"; \
	  setsid dockerd --iptables=false --ip6tables=false --ip-forward=false --bridge=none \
	    >>/var/log/fabric-lab-dockerd.log 2>&1 < /dev/null & \
	  for i in $$(seq 100); do docker info >/dev/null 2>&1 && break; sleep 0.2; done; \
	  docker info >/dev/null 2>&1 || { echo "dockerd did not start"; exit 1; }; }

# Switch and host images for the docker runtime, from a cached Debian rootfs; no registry.
images: docker $(ENGINES)
	$(PY) images/build.py

bench: setup
	$(PY) bench/deploy.py
	$(PY) bench/impair.py
	$(PY) bench/fib.py
	$(PY) bench/fpf.py
	$(PY) bench/srv6.py

# What is too long for CI, one report in reports/nightly-<time>/ (bench/nightly.py): every
# shipped lab deployed, validated and broken, the e2e fault suite, the netem and seg6 suites
# in a VM booted with Debian's stock kernel (images/vm.py; qemu is installed here), 100
# SIGKILL chaos trials and every benchmark; earlier reports are its history. Labs the host's
# neighbour tables cannot hold (fpf-64, scaleup-72) are reported skipped unless you opt in:
# make nightly NIGHTLY_ARGS=--raise-neighbour-limits
NIGHTLY_ARGS ?=
nightly: images
	@$(MAKE) --no-print-directory debs EXTRA_DEBS=qemu-system-x86
	$(PY) bench/nightly.py $(NIGHTLY_ARGS) --history $(wildcard reports/nightly-*)

clean: destroy
	rm -rf $(VENV) build *.egg-info
