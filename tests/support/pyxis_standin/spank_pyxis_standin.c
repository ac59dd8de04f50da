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
 * pyxis_slurmstepd.c does), and records what each node of each step asked for, one line a node and
 * step (slurm_spank_user_init runs once for each), to the file named by the plugstack argument
 * `record=PATH`:
 *
 *     JOBID.STEPID<TAB>NODE<TAB>image=IMAGE<TAB>mounts=MOUNTS<TAB>workdir=PATH<TAB>env=NAMES
 *         <TAB>name=CONTAINER<TAB>setup=import|reuse
 *
 * Named containers (--container-name=NAME, pyxis_slurmstepd.c slurm_spank_user_init and
 * enroot_container_create), as Pyxis keeps them in Enroot's data path: CONTAINER is pyxis_NAME, or
 * pyxis_JOBID_NAME with the plugstack argument container_scope=job (as Pyxis' own argument); the
 * data path is ENROOT_DATA_PATH of the step's environment (Pyxis runs Enroot with it; each node's
 * own directory), required with a name. A container that exists there is reused: no import, no
 * import lines (setup=reuse); one that does not is imported and made (setup=import), a directory
 * CONTAINER holding a file `image`, and left after the step, as Pyxis leaves a named container. The
 * check and the making are apart, as in Pyxis (user_init lists the containers; the first task
 * creates it): a second step that made the same container in between fails this one as `enroot
 * create` does ("File already exists"). The flags of NAME (:auto, :create, :exec, :no_exec) and
 * attaching to a running container are not modelled: a name with flags is refused. Errors of
 * user_init are returned by task_init, -1 as Pyxis does (Slurm passes no error of user_init on to
 * srun, and fails a task only on a negative one of task_init: plugstack.c _do_call_stack, task.c).
 * tests/support/pyxis_standin/enroot lists and removes these containers as `enroot list` and
 * `enroot remove -f` do.
 *
 * The task itself then runs on the host, not in a container: the stand-ins of the GPU tools that the
 * tests put on PATH answer for the image's programs.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <errno.h>
#include <unistd.h>

#include <slurm/spank.h>

SPANK_PLUGIN(pyxis, 1);

enum { IMAGE, MOUNTS, WORKDIR, NAME, SAVE, ENV, UNSHARE, FLAG, VALUES };
static char *values[VALUES];
static char record[4096];
static int scope_job;  /* container_scope=job */
static int user_init_rv;  /* 0 or -1, returned by task_init, as Pyxis does (Slurm fails a task on < 0) */

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
        else if (strcmp(av[i], "container_scope=job") == 0)
            scope_job = 1;
    return ESPANK_SUCCESS;
}

/* `n` bytes of `text` written to `path` (opened with O_WRONLY | O_CREAT | `flags`): 0, or -1 logged. */
static int write_text(const char *path, int flags, mode_t mode, const char *text, int n)
{
    int fd = open(path, O_WRONLY | O_CREAT | flags, mode);
    if (fd < 0 || n < 0 || write(fd, text, (size_t)n) != n) {
        slurm_error("pyxis stand-in: cannot write %s", path);
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    return 0;
}

/* The named container of the step on this node: its name into `container`, and whether it was there
 * (`*reused`); made when it was not. 0, or -1 with the error logged. */
static int named_container(spank_t sp, uint32_t job, char *container, size_t size, int *reused)
{
    if (strchr(values[NAME], ':') != NULL) {
        slurm_error("pyxis stand-in: --container-name flags are not modelled: %s", values[NAME]);
        return -1;
    }
    if (scope_job)
        snprintf(container, size, "pyxis_%u_%s", job, values[NAME]);
    else
        snprintf(container, size, "pyxis_%s", values[NAME]);
    char data[4096], path[8192];
    if (spank_getenv(sp, "ENROOT_DATA_PATH", data, sizeof(data)) != ESPANK_SUCCESS || data[0] != '/') {
        slurm_error("pyxis stand-in: --container-name needs ENROOT_DATA_PATH, the node's own directory");
        return -1;
    }
    snprintf(path, sizeof(path), "%s/%s", data, container);
    struct stat st;
    *reused = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
    if (*reused)
        return 0;  /* "pyxis: reusing existing container filesystem" */
    for (char *slash = strchr(data + 1, '/');; slash = strchr(slash + 1, '/')) {  /* mkdir -p, as Enroot */
        if (slash != NULL)
            *slash = '\0';
        if (mkdir(data, 0700) != 0 && errno != EEXIST) {
            slurm_error("pyxis stand-in: cannot make %s", data);
            return -1;
        }
        if (slash == NULL)
            break;
        *slash = '/';
    }
    if (mkdir(path, 0700) != 0) {  /* enroot create, in task_init: another step made it since */
        slurm_error("pyxis: failed to create container filesystem for image: %s (File already exists: %s)",
                    values[IMAGE], path);
        return -1;
    }
    char file[8300];
    snprintf(file, sizeof(file), "%s/image", path);
    return write_text(file, O_TRUNC, 0600, values[IMAGE], (int)strlen(values[IMAGE]));
}

static int user_init(spank_t sp)
{
    if (!spank_remote(sp) || values[IMAGE] == NULL)
        return 0;
    uint32_t job = 0, step = 0;
    spank_get_item(sp, S_JOB_ID, &job);
    spank_get_item(sp, S_JOB_STEPID, &step);
    char container[4096] = "";
    int reused = 0;
    if (values[NAME] != NULL && named_container(sp, job, container, sizeof(container), &reused) != 0)
        return -1;
    if (!reused) {
        uint32_t tasks = 0;  /* as Pyxis: "importing" only for a step of one task, or the batch step (0) */
        spank_get_item(sp, S_JOB_TOTAL_TASK_COUNT, &tasks);
        if (tasks <= 1)
            slurm_spank_log("pyxis: importing docker image: %s", values[IMAGE]);
        slurm_spank_log("pyxis: imported docker image: %s", values[IMAGE]);
    }
    if (record[0] == '\0')
        return 0;
    char host[256] = "";
    const char *node = getenv("SLURMD_NODENAME");
    if (node == NULL && gethostname(host, sizeof(host) - 1) == 0)
        node = host;
    char line[16384];
    int n = snprintf(line, sizeof(line), "%u.%u\t%s\timage=%s\tmounts=%s\tworkdir=%s\tenv=%s\tname=%s\tsetup=%s\n",
                     job, step, node ? node : "", values[IMAGE], values[MOUNTS] ? values[MOUNTS] : "",
                     values[WORKDIR] ? values[WORKDIR] : "", values[ENV] ? values[ENV] : "", container,
                     reused ? "reuse" : "import");
    return write_text(record, O_APPEND, 0644, line, n);
}

int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    user_init_rv = user_init(sp);
    return ESPANK_SUCCESS;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
    (void)sp;
    (void)ac;
    (void)av;
    return user_init_rv;
}
