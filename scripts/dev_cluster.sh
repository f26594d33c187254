#!/usr/bin/env bash
# A real SLURM cluster on loopback for development and CI (Debian's slurm-wlm 22.05 + munge + slurmdbd/MariaDB),
# without systemd: N virtual nodes on this host, optional fake GPUs, DGX-sized nodes and preemption partitions.
#
# usage:  scripts/dev_cluster.sh up [-n NODES] [-g GPUS] [--big] [--preempt] [--no-dbd] [--max-array-size N]
#                                    [--prefix DIR] [--port-base P]
#         scripts/dev_cluster.sh down   [--prefix DIR]      stops exactly the daemons in DIR's PID files
#         scripts/dev_cluster.sh status [--prefix DIR]      exit 0 when the cluster under DIR answers
#         scripts/dev_cluster.sh env    [--prefix DIR]      prints `export SLURM_CONF=...`
#         scripts/dev_cluster.sh --help                     this text
#   -n NODES virtual nodes (1)   -g GPUS fake GPUs per node (0)   --big DGX-sized nodes (128 CPUs, ~1 TiB)
#   --preempt two preemption partitions   --no-dbd no slurmdbd/MariaDB (sacct off)
#   --max-array-size N  MaxArraySize (SLURM's default 1001): array indices 0..N-1
#   defaults: --prefix /tmp/rlaunch-slurm --port-base 16817 (also from $PREFIX / $PORT_BASE)
#
# Idempotent: `up` with the same arguments on a running cluster does nothing; with other arguments it restarts.
# Two copies coexist when they differ in --prefix and --port-base (every port and node address is derived from it):
#   slurmctld P, slurmdbd P+2, MariaDB P+3, node i at 127.K.0.(10+i):P+10+i with K = (P / 50) % 256. Distinct
#   node addresses matter: job ids restart at 1 in each copy, and a job's Ray ports are derived from its id.
# Settings and why (docs/facts.md#slurm, each learned by failing): slurmdbd+MariaDB or sacct is off and submitit never
# learns a killed job died; the munge socket in AccountingStoragePass; DefMemPerCPU; EnforcePartLimits=ALL so an
# impossible request is refused at submit; cred_expire=10 + sched_interval=5 so a requeued job restarts in ~15 s;
# fake GPUs as character devices (slurmd rejects regular files); config_overrides for nodes bigger than the host.
# Must run as root (slurmd runs as root here).
set -euo pipefail

usage() { sed -n '/^# usage:/,/^#$/p' "$0" | sed 's/^# \{0,1\}//'; }
CMD=${1:-up}; shift || true
case "$CMD" in -h|--help|help) usage; exit 0;; esac
PREFIX=${PREFIX:-/tmp/rlaunch-slurm}
PORT_BASE=${PORT_BASE:-16817}
NODES=1; DBD=1; GPUS=0; BIG=0; PREEMPT=0; MAX_ARRAY=""
while [ $# -gt 0 ]; do
  case "$1" in
    -n) NODES=$2; shift 2;;
    -g) GPUS=$2; shift 2;;
    --big) BIG=1; shift;;
    --preempt) PREEMPT=1; shift;;
    --no-dbd) DBD=0; shift;;
    --max-array-size) MAX_ARRAY=$2; shift 2;;
    -h|--help) usage; exit 0;;
    --prefix) PREFIX=$2; shift 2;;
    --port-base) PORT_BASE=$2; shift 2;;
    *) echo "dev_cluster: unknown argument $1 (see: $0 --help)" >&2; exit 2;;
  esac
done
CTLD_PORT=$PORT_BASE; DBD_PORT=$((PORT_BASE + 2)); DB_PORT=$((PORT_BASE + 3)); NODE_PORT0=$((PORT_BASE + 10))
export SLURM_CONF=$PREFIX/etc/slurm.conf
SIGNATURE="n=$NODES g=$GPUS big=$BIG preempt=$PREEMPT dbd=$DBD ports=$PORT_BASE array=$MAX_ARRAY"
T0=$(date +%s%N)
log() { printf '[dev_cluster %6sms] %s\n' "$(( ($(date +%s%N) - T0) / 1000000 ))" "$*"; }

alive() { [ -f "$1" ] && kill -0 "$(cat "$1" 2>/dev/null)" 2>/dev/null; }

stop_pidfile() {  # stop the daemon recorded in one of OUR PID files, wait for it to exit
  local f=$1 p
  [ -f "$f" ] || return 0
  p=$(cat "$f" 2>/dev/null || true)
  if [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then
    kill "$p"; for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$p" 2>/dev/null && kill -9 "$p" || true
  fi
  rm -f "$f"
}

down() {
  for f in "$PREFIX"/run/slurmd-*.pid; do [ -e "$f" ] && stop_pidfile "$f"; done
  stop_pidfile "$PREFIX/run/slurmctld.pid"
  stop_pidfile "$PREFIX/run/slurmdbd.pid"
  stop_pidfile "$PREFIX/db/mysqld.pid"
  stop_pidfile "$PREFIX/munge/munged.pid"
  rm -f "$PREFIX/signature"
}

answers() { alive "$PREFIX/run/slurmctld.pid" && timeout 10 sinfo -h >/dev/null 2>&1; }

case "$CMD" in
  env) echo "export SLURM_CONF=$SLURM_CONF"; exit 0;;
  down) down; log "down ($PREFIX)"; exit 0;;
  status) answers && { sinfo; exit 0; } || { echo "dev_cluster: no cluster answers under $PREFIX" >&2; exit 1; };;
  up) ;;
  *) echo "dev_cluster: unknown command $CMD: use up, down, status or env (see: $0 --help)" >&2; exit 2;;
esac

[ "$(id -u)" = 0 ] || { echo "dev_cluster: must run as root (slurmd runs as root here)" >&2; exit 1; }
if answers && [ "$(cat "$PREFIX/signature" 2>/dev/null)" = "$SIGNATURE" ]; then
  log "already up ($SIGNATURE).  export SLURM_CONF=$SLURM_CONF"; exit 0
fi
down  # a different shape, or a half-started cluster: start clean (only our own PIDs)

# ---------------------------------------------------------------- 1. packages (a fresh machine has none of them)
PKGS="slurm-wlm munge"
[ "$DBD" = 1 ] && PKGS="$PKGS slurmdbd mariadb-server"
mkdir -p "$PREFIX"
# Every test worker starts a cluster of its own: on a fresh machine they would all run apt-get at once, and all but one
# fail on dpkg's lock. One installs while the others wait, then find nothing missing.
{
  flock 9
  missing=""
  for p in $PKGS; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
  if [ -n "$missing" ]; then
    made_policy=0  # keep postinst scripts from starting daemons (no systemd here)
    if [ ! -e /usr/sbin/policy-rc.d ]; then printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; made_policy=1; fi
    # an apt-get of someone else's (not ours: ours hold the flock) is waited for, not failed on
    apt-get -o DPkg::Lock::Timeout=600 update -q > "$PREFIX/apt.log" 2>&1 || true
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends $missing \
      >> "$PREFIX/apt.log" 2>&1 || { tail -20 "$PREFIX/apt.log"; exit 1; }
    [ "$made_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
    log "apt-get installed:$missing"
  fi
} 9> /tmp/rlaunch-dev-cluster-packages.lock  # /tmp: every machine has it (not every container has /var/lock)

HOST=$(hostname -s)
mkdir -p "$PREFIX"/{etc,state/ctld,state/d,log,run,munge}
chmod 755 "$PREFIX" "$PREFIX/munge"

# ---------------------------------------------------------------- 2. munge: own key and socket under $PREFIX
MSOCK=$PREFIX/munge/munge.socket.2
if [ ! -f "$PREFIX/munge/munge.key" ]; then
  dd if=/dev/urandom of="$PREFIX/munge/munge.key" bs=1 count=1024 status=none
  chmod 400 "$PREFIX/munge/munge.key"
fi
munged --socket="$MSOCK" --key-file="$PREFIX/munge/munge.key" --log-file="$PREFIX/munge/munged.log" \
       --pid-file="$PREFIX/munge/munged.pid" --seed-file="$PREFIX/munge/munged.seed"
munge -S "$MSOCK" -n | unmunge -S "$MSOCK" > /dev/null
log "munged up"

# ---------------------------------------------------------------- 3. node geometry (RealMemory <= slurmd -C)
read -r CPUS BOARDS SOCKETS CORES THREADS MEM < <(slurmd -C | head -1 | sed -E \
  's/.*CPUs=([0-9]+) Boards=([0-9]+) SocketsPerBoard=([0-9]+) CoresPerSocket=([0-9]+) ThreadsPerCore=([0-9]+) RealMemory=([0-9]+).*/\1 \2 \3 \4 \5 \6/')
NODE_MEM=$(( MEM * 80 / 100 / NODES ))
ADDRS=$(seq -s, -f "127.$(( (PORT_BASE / 50) % 256 )).0.%g" 11 $((10 + NODES)))

# ---------------------------------------------------------------- 4. MariaDB + slurmdbd, so sacct works
ACCT="AccountingStorageType=accounting_storage/none"
if [ "$DBD" = 1 ]; then
  mkdir -p "$PREFIX/db"
  if [ ! -d "$PREFIX/db/data/mysql" ]; then
    mariadb-install-db --no-defaults --datadir="$PREFIX/db/data" --user=root \
      --auth-root-authentication-method=socket --skip-test-db > "$PREFIX/db/install.log" 2>&1
  fi
  (mariadbd --no-defaults --user=root --datadir="$PREFIX/db/data" --socket="$PREFIX/db/mysqld.sock" \
     --pid-file="$PREFIX/db/mysqld.pid" --bind-address=127.0.0.1 --port="$DB_PORT" --skip-name-resolve \
     --log-error="$PREFIX/db/mysqld.err" --innodb-buffer-pool-size=64M --innodb-lock-wait-timeout=900 \
     > /dev/null 2>&1 &)
  for _ in $(seq 1 120); do mariadb-admin --socket="$PREFIX/db/mysqld.sock" ping >/dev/null 2>&1 && break; sleep 0.25; done
  mariadb --socket="$PREFIX/db/mysqld.sock" -e \
    "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurmpw'; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"
  log "mariadb up"
  cat > "$PREFIX/etc/slurmdbd.conf" <<EOF
AuthType=auth/munge
AuthInfo=socket=$MSOCK
DbdHost=$HOST
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=root
DebugLevel=info
LogFile=$PREFIX/log/slurmdbd.log
PidFile=$PREFIX/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=slurmpw
StorageLoc=slurm_acct_db
EOF
  chmod 600 "$PREFIX/etc/slurmdbd.conf"
  # the slurmctld<->slurmdbd connection authenticates with the socket in AccountingStoragePass, not AuthInfo
  ACCT="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$DBD_PORT
AccountingStoragePass=$MSOCK"
fi

# ---------------------------------------------------------------- 5. slurm.conf
GRES_TYPES=""; NODE_GRES=""
if [ "$GPUS" -gt 0 ]; then
  mkdir -p "$PREFIX/dev"
  for i in $(seq 0 $((GPUS - 1))); do [ -e "$PREFIX/dev/nvidia$i" ] || mknod "$PREFIX/dev/nvidia$i" c 1 3; done
  printf 'NodeName=c[1-%s] Name=gpu File=%s/dev/nvidia[0-%s]\n' "$NODES" "$PREFIX" "$((GPUS - 1))" > "$PREFIX/etc/gres.conf"
  GRES_TYPES="GresTypes=gpu"; NODE_GRES="Gres=gpu:$GPUS"
else
  rm -f "$PREFIX/etc/gres.conf"
fi
NODE_SHAPE="CPUs=$CPUS Boards=$BOARDS SocketsPerBoard=$SOCKETS CoresPerSocket=$CORES ThreadsPerCore=$THREADS RealMemory=$NODE_MEM"
EXTRA=""
if [ "$BIG" = 1 ]; then
  NODE_SHAPE="CPUs=128 RealMemory=1031000"; EXTRA="SlurmdParameters=config_overrides"
fi
[ -n "$MAX_ARRAY" ] && EXTRA="$EXTRA
MaxArraySize=$MAX_ARRAY"
PART_EXTRA=""; PART2=""
if [ "$PREEMPT" = 1 ]; then
  EXTRA="$EXTRA
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
SlurmctldParameters=preempt_send_user_signal"
  PART_EXTRA=" PriorityTier=1 GraceTime=20"
  PART2="PartitionName=urgent Nodes=ALL MaxTime=INFINITE State=UP DefMemPerCPU=1000 PriorityTier=10"
fi
NODE_LIST="c[1-$NODES]"; NODE_PORTS="[$((NODE_PORT0 + 1))-$((NODE_PORT0 + NODES))]"
[ "$NODES" = 1 ] && { NODE_LIST=c1; NODE_PORTS=$((NODE_PORT0 + 1)); }
[ -f "$PREFIX/etc/gres.conf" ] && sed -i "s/^NodeName=c\[1-1\]/NodeName=c1/" "$PREFIX/etc/gres.conf"
cat > "$SLURM_CONF" <<EOF
ClusterName=rl$PORT_BASE
$GRES_TYPES
$EXTRA
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$CTLD_PORT
SlurmdPort=$((NODE_PORT0))
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MSOCK,cred_expire=10
StateSaveLocation=$PREFIX/state/ctld
SlurmdSpoolDir=$PREFIX/state/d/%n
SlurmctldPidFile=$PREFIX/run/slurmctld.pid
SlurmdPidFile=$PREFIX/run/slurmd-%n.pid
SlurmctldLogFile=$PREFIX/log/slurmctld.log
SlurmdLogFile=$PREFIX/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=5,bf_interval=2
EnforcePartLimits=ALL
MpiDefault=none
ReturnToService=2
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=2
JobAcctGatherParams=OverMemoryKill
JobCompType=jobcomp/filetxt
JobCompLoc=$PREFIX/log/jobcomp.txt
$ACCT
InactiveLimit=0
KillWait=5
MinJobAge=300
Waittime=0
SlurmdTimeout=60
NodeName=$NODE_LIST NodeHostname=$HOST NodeAddr=$ADDRS Port=$NODE_PORTS $NODE_SHAPE $NODE_GRES State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP DefMemPerCPU=1000$PART_EXTRA
$PART2
EOF

# ---------------------------------------------------------------- 6. daemons, then poll until every node is idle
if [ "$DBD" = 1 ]; then
  slurmdbd
  for _ in $(seq 1 120); do sacctmgr -n -P show cluster >/dev/null 2>&1 && break; sleep 0.25; done
  log "slurmdbd up"
fi
slurmctld -f "$SLURM_CONF"
for i in $(seq 1 "$NODES"); do
  mkdir -p "$PREFIX/state/d/c$i"
  slurmd -f "$SLURM_CONF" -N "c$i"
done
# slurmctld recovers the jobs and node states a killed earlier session left in $PREFIX/state (its job IDs go on from
# there, so sacct never mixes two sessions' jobs): cancel those jobs and return any node they left down or drained,
# so a fresh cluster starts empty instead of waiting on nodes held by jobs no slurmd runs any more.
for _ in $(seq 1 120); do sinfo -h >/dev/null 2>&1 && break; sleep 0.25; done
scancel --full -u root >/dev/null 2>&1 || true
for _ in $(seq 1 480); do
  states=$(sinfo -h -N -o '%t' 2>/dev/null | sort -u)
  [ "$states" = idle ] && [ "$(sinfo -h -N -o '%N' 2>/dev/null | sort -u | wc -l)" = "$NODES" ] && break
  case "$states" in *down*|*drain*|*drng*) scontrol update NodeName=ALL State=RESUME >/dev/null 2>&1 || true;; esac
  sleep 0.25
done
if [ "$(sinfo -h -N -o '%t' | sort -u)" != idle ]; then
  echo "dev_cluster: nodes not idle within 120 s; see $PREFIX/log. Node states:" >&2
  sinfo -h -N -o '  %N %t %E' 2>&1 | sort -u >&2
  tail -n 15 "$PREFIX/log/slurmctld.log" >&2
  exit 1
fi
echo "$SIGNATURE" > "$PREFIX/signature"
sinfo
log "up: $NODES node(s) idle.  export SLURM_CONF=$SLURM_CONF"
