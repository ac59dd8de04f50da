/*
 * A stand-in for NVIDIA's Pyxis SPANK plugin, for the tests' localhost Slurm (tests/slurm_cluster.py).
 *
 * The kits run their steps with `srun --container-image=... --container-mounts=...`. Slurm refuses
 * an option no SPANK plugin registers, so without a plugin that registers Pyxis' options no kit job
 * runs at all; Pyxis itself needs Enroot and images, which a test machine has not. This plugin is our
 * own code: it registers the same options as Pyxis v0.24.0 (their names and whether each takes an
 * argument, as NVIDIA/pyxis args.c has them), prints the lines Pyxis prints into a step's output when
 * it imports an image (`pyxis: importing docker image: IMAGE` for a step of one task, and `pyxis:
 * imported docker image: IMAGE`, with slurm_spank_log from slurm_spank_user_init in slurmstepd, as
 * pyxis_slurmstepd.c does), and records what each
 * task asked for, one line a task, to the file named by the plugstack argument `record=PATH`:
 *
 *     JOBID.STEPID<TAB>NODE<TAB>image=IMAGE<TAB>mounts=MOUNTS<TAB>workdir=PATH<TAB>env=NAMES
 *
 * The task itself then runs on the host, not in a container: the stand-ins of the GPU tools that the
 * tests put on PATH answer for the image's programs.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <slurm/spank.h>

SPANK_PLUGIN(pyxis, 1);

enum { IMAGE, MOUNTS, WORKDIR, NAME, SAVE, ENV, UNSHARE, FLAG, VALUES };
static char *values[VALUES];
static char record[4096];

static int set_value(int which, const char *optarg, int remote)
{
    (void)remote;
    free(values[which]);
    values[which] = strdup(optarg ? optarg : "1");
    return values[which] ? ESPANK_SUCCESS : ESPANK_ERROR;
}

static int image(int val, const char *optarg, int remote) { (void)val; return set_value(IMAGE, optarg, remote); }
static int mounts(int val, const char *optarg, int remote) { (void)val; return set_value(MOUNTS, optarg, remote); }
static int workdir(int val, const char *optarg, int remote) { (void)val; return set_value(WORKDIR, optarg, remote); }
static int name(int val, const char *optarg, int remote) { (void)val; return set_value(NAME, optarg, remote); }
static int save(int val, const char *optarg, int remote) { (void)val; return set_value(SAVE, optarg, remote); }
static int env(int val, const char *optarg, int remote) { (void)val; return set_value(ENV, optarg, remote); }
static int unshare(int val, const char *optarg, int remote) { (void)val; return set_value(UNSHARE, optarg, remote); }
static int flag(int val, const char *optarg, int remote) { (void)val; (void)optarg; return set_value(FLAG, NULL, remote); }

struct spank_option spank_options[] = {
    {"container-image", "[USER@][REGISTRY#]IMAGE[:TAG]|PATH", "[pyxis stand-in] the image", 1, 0, image},
    {"container-mounts", "SRC:DST[:FLAGS][,SRC:DST...]", "[pyxis stand-in] bind mounts", 1, 0, mounts},
    {"container-workdir", "PATH", "[pyxis stand-in] working directory", 1, 0, workdir},
    {"container-name", "NAME", "[pyxis stand-in] container name", 1, 0, name},
    {"container-save", "PATH", "[pyxis stand-in] save the container", 1, 0, save},
    {"container-mount-home", NULL, "[pyxis stand-in]", 0, 0, flag},
    {"no-container-mount-home", NULL, "[pyxis stand-in]", 0, 0, flag},
    {"container-remap-root", NULL, "[pyxis stand-in]", 0, 0, flag},
    {"no-container-remap-root", NULL, "[pyxis stand-in]", 0, 0, flag},
    {"container-entrypoint", NULL, "[pyxis stand-in]", 0, 0, flag},
    {"no-container-entrypoint", NULL, "[pyxis stand-in]", 0, 0, flag},
    {"container-entrypoint-log", NULL, "[pyxis stand-in]", 0, 0, flag},
    {"container-writable", NULL, "[pyxis stand-in]", 0, 0, flag},
    {"container-readonly", NULL, "[pyxis stand-in]", 0, 0, flag},
    {"container-env", "NAME[,NAME...]", "[pyxis stand-in] environment names", 1, 0, env},
    {"container-unshare", "NS[,NS...]", "[pyxis stand-in] namespaces", 1, 0, unshare},
    SPANK_OPTIONS_TABLE_END
};

int slurm_spank_init(spank_t sp, int ac, char **av)
{
    (void)sp;
    for (int i = 0; i < ac; i++)
        if (strncmp(av[i], "record=", 7) == 0)
            snprintf(record, sizeof(record), "%s", av[i] + 7);
    return ESPANK_SUCCESS;
}

int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    if (!spank_remote(sp) || values[IMAGE] == NULL)
        return ESPANK_SUCCESS;
    uint32_t tasks = 0;  /* as Pyxis: "importing" only for a step of one task, or the batch step (0) */
    spank_get_item(sp, S_JOB_TOTAL_TASK_COUNT, &tasks);
    if (tasks <= 1)
        slurm_spank_log("pyxis: importing docker image: %s", values[IMAGE]);
    slurm_spank_log("pyxis: imported docker image: %s", values[IMAGE]);
    if (record[0] == '\0')
        return ESPANK_SUCCESS;
    uint32_t job = 0, step = 0;
    spank_get_item(sp, S_JOB_ID, &job);
    spank_get_item(sp, S_JOB_STEPID, &step);
    char host[256] = "";
    const char *node = getenv("SLURMD_NODENAME");
    if (node == NULL && gethostname(host, sizeof(host) - 1) == 0)
        node = host;
    char line[16384];
    int n = snprintf(line, sizeof(line), "%u.%u\t%s\timage=%s\tmounts=%s\tworkdir=%s\tenv=%s\n", job, step,
                     node ? node : "", values[IMAGE], values[MOUNTS] ? values[MOUNTS] : "",
                     values[WORKDIR] ? values[WORKDIR] : "", values[ENV] ? values[ENV] : "");
    int fd = open(record, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0 || n < 0 || write(fd, line, (size_t)n) != n) {
        slurm_error("pyxis stand-in: cannot record to %s", record);
        if (fd >= 0)
            close(fd);
        return ESPANK_ERROR;
    }
    close(fd);
    return ESPANK_SUCCESS;
}
