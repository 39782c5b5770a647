#!/usr/bin/env bash
# Install (from Debian's packages) and start a single-node Slurm cluster on this machine, for
# archfit's Slurm tests and for trying the slurm executor. Needs root. Idempotent: running it
# again with Slurm up only checks that it answers.
#
#   sudo scripts/slurm-up.sh          # install + configure + start
#   ARCHFIT_SLURM_GPUS=4 ...          # how many fake GPUs (gres on /dev/tty*) the node offers
#
# The node offers this machine's CPUs and memory, and fake GPUs whose "devices" are /dev/tty*
# (Slurm only needs a file per GPU to hand out; nothing reads them). Accounting is off, as on
# many small clusters: archfit reads job state from its run directories, never from sacct.
set -euo pipefail

GPUS=${ARCHFIT_SLURM_GPUS:-4}
log() { echo "[slurm-up] $*"; }

if [ "$(id -u)" != 0 ]; then
  echo "[slurm-up] must run as root (apt-get and the daemons need it)" >&2
  exit 1
fi

if sinfo -h -o %T >/dev/null 2>&1 && sinfo -h -o %T | grep -qE 'idle|mix|alloc'; then
  log "Slurm already answers: $(sinfo -h -o '%P %T %D')"
  exit 0
fi

if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  log "installing slurm-wlm and munge from Debian's packages"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null
fi

host=$(hostname -s)
cpus=$(nproc)
mem_mb=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))

# --- munge: a key, and the daemon running as its own user
if [ ! -s /etc/munge/munge.key ]; then
  mungekey --create --force 2>/dev/null || dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
fi
chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
mkdir -p /run/munge /var/log/munge /var/lib/munge
chown -R munge:munge /run/munge /var/log/munge /var/lib/munge
if ! pgrep -x munged >/dev/null; then
  runuser -u munge -- /usr/sbin/munged --force
fi
for _ in $(seq 50); do munge -n >/dev/null 2>&1 && break; sleep 0.1; done
munge -n | unmunge >/dev/null

# --- slurm.conf: one node, every CPU, fake GPUs
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
gres_files="/dev/tty[0-$((GPUS - 1))]"
cat >/etc/slurm/slurm.conf <<CONF
# written by archfit scripts/slurm-up.sh
ClusterName=archfit
SlurmctldHost=${host}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1024
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
GresTypes=gpu
MaxArraySize=1001
KillWait=10
SlurmctldTimeout=30
SlurmdTimeout=30
MinJobAge=30
NodeName=${host} CPUs=${cpus} RealMemory=${mem_mb} Gres=gpu:${GPUS} State=UNKNOWN
PartitionName=debug Nodes=${host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
cat >/etc/slurm/gres.conf <<CONF
NodeName=${host} Name=gpu File=${gres_files}
CONF
# no cgroup.conf: slurmd autodetects the cgroup flavour; proctrack/linuxproc and task/none
# mean it never needs to create cgroups (containers often forbid that)
rm -f /etc/slurm/cgroup.conf

pgrep -x slurmctld >/dev/null || slurmctld
pgrep -x slurmd >/dev/null || slurmd
for i in $(seq 60); do
  state=$(sinfo -h -o %T 2>/dev/null || true)
  case "$state" in
    idle*|mix*|alloc*) log "up: $(sinfo -h -o 'partition %P, %D node(s), %T, %C cpus (A/I/O/T), gres %G')"; exit 0 ;;
    down*|drain*) scontrol update nodename="$host" state=resume 2>/dev/null || true ;;
  esac
  sleep 1
done
echo "[slurm-up] Slurm did not come up; last logs:" >&2
tail -n 20 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log >&2 || true
exit 1
