"""torch.distributed's process group, collectives included: rank 0 listens on a port of the
loopback interface, which it publishes in the run's rendezvous directory (STANDIN_TORCH_RENDEZVOUS,
which the torchrun stand-in gives each run), and every other rank connects to it, as NCCL's
ranks meet at init_process_group. A collective is what NCCL's is: every rank gives its value and
every rank gets the same result (all_reduce's SUM or MAX of the ranks' values; barrier returns once
every rank reached it); a rank that never comes blocks the others, one that is gone fails them."""
import json
import os
import socket
import time

_world = {"up": False, "peers": {}, "leader": None}


class ReduceOp:
    SUM = "sum"
    MAX = "max"


def get_rank():
    return int(os.environ["RANK"])


def get_world_size():
    return int(os.environ["WORLD_SIZE"])


def init_process_group(backend):
    if backend != "nccl":
        raise RuntimeError(f"stand-in: backend {backend}")
    rank, world = get_rank(), get_world_size()
    if world > 1:
        directory = os.environ["STANDIN_TORCH_RENDEZVOUS"]
        published = os.path.join(directory, "port")
        if rank == 0:
            os.makedirs(directory, exist_ok=True)
            server = socket.create_server(("127.0.0.1", 0), backlog=world)
            with open(published + ".tmp", "w") as out:
                out.write(str(server.getsockname()[1]))
            os.rename(published + ".tmp", published)
            while len(_world["peers"]) < world - 1:
                connection, _ = server.accept()
                stream = connection.makefile("rw")
                _world["peers"][int(stream.readline())] = stream
            server.close()
        else:
            deadline = time.monotonic() + 120
            while not os.path.exists(published):
                if time.monotonic() > deadline:
                    raise RuntimeError("stand-in: rank 0 never published its port")
                time.sleep(0.05)
            with open(published) as source:
                port = int(source.read())
            stream = socket.create_connection(("127.0.0.1", port)).makefile("rw")
            stream.write(f"{rank}\n")
            stream.flush()
            _world["leader"] = stream
    _world["up"] = True


def _collective(value, combine):
    """Every rank's `value` combined (rank order), the same result on every rank."""
    if not _world["up"]:
        raise RuntimeError("stand-in: no process group")
    if get_world_size() == 1:
        return combine([value])
    if _world["leader"] is not None:
        _world["leader"].write(json.dumps(value) + "\n")
        _world["leader"].flush()
        answer = _world["leader"].readline()
        if not answer:
            raise RuntimeError("stand-in: rank 0 is gone")
        return json.loads(answer)
    values = [value]
    for peer in sorted(_world["peers"]):
        line = _world["peers"][peer].readline()
        if not line:
            raise RuntimeError(f"stand-in: rank {peer} is gone")
        values.append(json.loads(line))
    result = combine(values)
    for stream in _world["peers"].values():
        stream.write(json.dumps(result) + "\n")
        stream.flush()
    return result


def all_reduce(tensor, op=ReduceOp.SUM):
    tensor.value = _collective(tensor.value, sum if op == ReduceOp.SUM else max)


def barrier():
    _collective(0, len)


def destroy_process_group():
    barrier()
    for stream in [*_world["peers"].values(), _world["leader"]]:
        if stream is not None:
            stream.close()
    _world.update(up=False, peers={}, leader=None)
