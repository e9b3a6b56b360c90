/* The verifier's supervisor: the harness's own static program, so that verification
 * needs nothing from the task's image (no python3, tar, bash, env or find).
 *
 *   supervise STATUS_DIR [--empty PATH]... [--mkdir DIR] [--untar DIR] [--home DIR]
 *             [--cwd DIR] [--env K=V]... -- [ARGV...]
 *
 * (With no ARGV it only does steps 2-3 and exits 0: a pristine session prepared for a
 * state copied in by other means.)
 *
 * Built by the harness from this file (`cc -static -Os`, see trial/harness.py) and
 * mounted read-only into every verifier session. In order it:
 *
 * 1. makes itself the child subreaper of everything it starts and not dumpable, and
 *    ignores every catchable signal (only SIGKILL/SIGSTOP stop it: never a reward);
 * 2. --empty: empties each path (a directory's entries removed, the directory kept, as
 *    it may be a mount point; anything else removed; links never followed);
 *    --mkdir: creates DIR (0755, parents too);
 * 3. --untar: restores an uncompressed GNU/ustar archive read from stdin under DIR
 *    (regular files, directories, symbolic links; owners, modes and file times kept;
 *    names are bytes of any length and depth, walked one component at a time with
 *    O_NOFOLLOW, and a `..` component refuses the archive). When steps 2-3 fail it
 *    exits RESTORE_FAILED (86) and writes no status: the command never ran;
 * 4. --home: makes DIR a new, empty directory (0700) and the command's HOME, so no
 *    start-up file of the agent's (a state root is often /root) is read;
 * 5. runs ARGV in --cwd (made when the agent removed it; a link there is not entered)
 *    with exactly the --env environment (argv[0] resolved through that PATH by the
 *    supervisor, never by a shell), reaps every orphan re-parented to it while
 *    it runs, and when it exits kills and reaps every remaining descendant;
 * 6. writes STATUS_DIR/supervisor.json ({"exit_code", "orphans", "orphan_count",
 *    "outputs": what kind of file each reward file and the CTRF report is, seen after
 *    every process ended, so a link, FIFO or directory there is known even where the
 *    copy out leaves it behind}) by a new file renamed over the name (a link planted
 *    there is replaced, never followed), then exits with the command's status.
 *
 * Why orphans void the verdict: a process that outlives the one that started it is the
 * only way code the verifier ran on the agent's behalf can keep acting after the
 * verifier last wrote its reward. The harness gives no reward when any was seen.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RESTORE_FAILED 86
#define STATUS_WRITE_FAILED 87
#define USAGE 2
#define MAX_ORPHANS_SHOWN 20
#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

static void die_restore(const char *what, const char *name) {
    fprintf(stderr, "supervise: cannot restore the state: %s%s%.200s (%s)\n", what,
            name ? ": " : "", name ? name : "", strerror(errno));
    _exit(RESTORE_FAILED);
}

/* ---- emptying ------------------------------------------------------------------- */

static int remove_entries(int dfd) {
    int dup_fd = dup(dfd);
    if (dup_fd < 0) return -1;
    DIR *d = fdopendir(dup_fd);
    if (!d) { close(dup_fd); return -1; }
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (unlinkat(dfd, e->d_name, 0) == 0) continue;
        if (errno != EISDIR && errno != EPERM) { rc = -1; continue; }
        int sub = openat(dfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0) { rc = -1; continue; }
        if (remove_entries(sub) != 0) rc = -1;
        close(sub);
        if (unlinkat(dfd, e->d_name, AT_REMOVEDIR) != 0) rc = -1;
    }
    closedir(d);
    return rc;
}

static void empty_path(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT) return;
        die_restore("cannot look at", path);
    }
    if (!S_ISDIR(st.st_mode)) {
        if (unlink(path) != 0) die_restore("cannot remove", path);
        return;
    }
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || remove_entries(fd) != 0) die_restore("cannot empty", path);
    close(fd);
}

static void make_dirs(const char *path) {
    char buf[4096];
    if (strlen(path) >= sizeof buf) { errno = ENAMETOOLONG; die_restore("mkdir", path); }
    strcpy(buf, path);
    for (char *p = buf + 1; ; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST) die_restore("mkdir", buf);
            *p = c;
            if (c == '\0') break;
        }
    }
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode)) die_restore("not a directory", path);
    chmod(path, 0755);
}

/* ---- restoring an archive ------------------------------------------------------- */

static int read_full(int fd, char *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return got == 0 ? 0 : -1;
        got += (size_t)r;
    }
    return 1;
}

static unsigned long long tar_number(const char *field, size_t len) {
    unsigned long long v = 0;
    if ((unsigned char)field[0] & 0x80) { /* base-256 (GNU, for large values) */
        v = (unsigned char)field[0] & 0x7f;
        for (size_t i = 1; i < len; i++) v = (v << 8) | (unsigned char)field[i];
        return v;
    }
    for (size_t i = 0; i < len && field[i]; i++) {
        if (field[i] == ' ') continue;
        if (field[i] < '0' || field[i] > '7') break;
        v = v * 8 + (unsigned long long)(field[i] - '0');
    }
    return v;
}

static char *read_long(unsigned long long size) { /* a GNU 'L'/'K' record's data */
    if (size > (1u << 24)) { errno = ENAMETOOLONG; die_restore("long name record", NULL); }
    size_t padded = (size_t)((size + 511) / 512 * 512);
    char *buf = malloc(padded + 1);
    if (!buf || read_full(0, buf, padded) != 1) die_restore("truncated archive", NULL);
    buf[size] = '\0';
    return buf;
}

/* The directory chain the process's cwd stands in, below the restore root. */
static char **cur;
static size_t cur_len, cur_cap;

static void enter(const char *comp, mode_t mode) {
    int fd = open(comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
        if (mkdir(comp, mode) != 0 && errno != EEXIST) die_restore("mkdir", comp);
        fd = open(comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (fd < 0 || fchdir(fd) != 0) die_restore("cannot enter", comp);
    close(fd);
    if (cur_len == cur_cap) {
        cur_cap = cur_cap ? cur_cap * 2 : 64;
        cur = realloc(cur, cur_cap * sizeof *cur);
        if (!cur) die_restore("out of memory", NULL);
    }
    cur[cur_len++] = strdup(comp);
}

/* Make the cwd the parent of `name` (components split in place); the last component. */
static char *go_to_parent(char *name) {
    char *save = NULL;
    char **all = NULL;
    size_t all_n = 0, all_cap = 0;
    for (char *c = strtok_r(name, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        if (!strcmp(c, ".")) continue;
        if (!strcmp(c, "..")) { errno = EINVAL; die_restore("a '..' in the name", name); }
        if (all_n == all_cap) {
            all_cap = all_cap ? all_cap * 2 : 64;
            all = realloc(all, all_cap * sizeof *all);
            if (!all) die_restore("out of memory", NULL);
        }
        all[all_n++] = c;
    }
    if (all_n == 0) { free(all); return NULL; } /* the restore root itself */
    size_t parents = all_n - 1, same = 0;
    while (same < parents && same < cur_len && !strcmp(cur[same], all[same])) same++;
    while (cur_len > same) {
        if (chdir("..") != 0) die_restore("cannot leave", cur[cur_len - 1]);
        free(cur[--cur_len]);
    }
    for (size_t i = same; i < parents; i++) enter(all[i], 0755);
    char *last = all[all_n - 1];
    free(all);
    return last;
}

static void set_owner_mode_times(int fd, const char *name, unsigned long long uid,
                                 unsigned long long gid, mode_t mode, time_t mtime, int link) {
    struct timespec ts[2] = {{mtime, 0}, {mtime, 0}};
    if (link) {
        if (fchownat(AT_FDCWD, name, (uid_t)uid, (gid_t)gid, AT_SYMLINK_NOFOLLOW) != 0 &&
            errno != EPERM) die_restore("chown", name);
        utimensat(AT_FDCWD, name, ts, AT_SYMLINK_NOFOLLOW);
        return;
    }
    if (fchown(fd, (uid_t)uid, (gid_t)gid) != 0 && errno != EPERM) die_restore("chown", name);
    if (fchmod(fd, mode & 07777) != 0) die_restore("chmod", name);
    if (mtime) futimens(fd, ts);
}

static void copy_data(int fd, unsigned long long size, const char *name) {
    char buf[65536];
    unsigned long long left = (size + 511) / 512 * 512, data = size;
    while (left > 0) {
        size_t chunk = left > sizeof buf ? sizeof buf : (size_t)left;
        if (read_full(0, buf, chunk) != 1) die_restore("truncated archive", name);
        size_t keep = data > chunk ? chunk : (size_t)data;
        for (size_t off = 0; keep > 0 && fd >= 0;) {
            ssize_t w = write(fd, buf + off, keep - off);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) die_restore("write", name);
            off += (size_t)w;
            if (off == keep) break;
        }
        data -= keep;
        left -= chunk;
    }
}

static void clear_name(const char *name, int keep_dir) {
    struct stat st;
    if (fstatat(AT_FDCWD, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return;
    if (S_ISDIR(st.st_mode)) {
        if (keep_dir) return;
        int fd = open(name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 || remove_entries(fd) != 0) die_restore("cannot replace", name);
        close(fd);
        if (unlinkat(AT_FDCWD, name, AT_REMOVEDIR) != 0) die_restore("cannot replace", name);
    } else if (unlinkat(AT_FDCWD, name, 0) != 0) {
        die_restore("cannot replace", name);
    }
}

static void untar(const char *root) {
    if (chdir(root) != 0) die_restore("cannot enter", root);
    char block[512];
    char *long_name = NULL, *long_link = NULL;
    int zeros = 0;
    for (;;) {
        int r = read_full(0, block, 512);
        if (r == 0) break; /* end of input: a tar may omit its end blocks */
        if (r < 0) die_restore("truncated archive", NULL);
        int empty = 1;
        for (int i = 0; i < 512 && empty; i++) empty = block[i] == 0;
        if (empty) { if (++zeros == 2) break; continue; }
        zeros = 0;
        unsigned long long sum = 0;
        for (int i = 0; i < 512; i++)
            sum += (i >= 148 && i < 156) ? ' ' : (unsigned char)block[i];
        if (sum != tar_number(block + 148, 8)) { errno = EINVAL; die_restore("bad header checksum", NULL); }
        char type = block[156];
        unsigned long long size = tar_number(block + 124, 12);
        if (type == 'L') { free(long_name); long_name = read_long(size); continue; }
        if (type == 'K') { free(long_link); long_link = read_long(size); continue; }
        char *name;
        if (long_name) {
            name = long_name;
            long_name = NULL;
        } else {
            name = calloc(1, 100 + 155 + 2);
            if (!name) die_restore("out of memory", NULL);
            if (!memcmp(block + 257, "ustar\0", 6) && block[345]) {
                memcpy(name, block + 345, strnlen(block + 345, 155));
                strcat(name, "/");
            }
            strncat(name, block, strnlen(block, 100));
        }
        char *link;
        if (long_link) {
            link = long_link;
            long_link = NULL;
        } else {
            link = calloc(1, 101);
            if (!link) die_restore("out of memory", NULL);
            memcpy(link, block + 157, strnlen(block + 157, 100));
        }
        mode_t mode = (mode_t)tar_number(block + 100, 8);
        unsigned long long uid = tar_number(block + 108, 8), gid = tar_number(block + 116, 8);
        time_t mtime = (time_t)tar_number(block + 136, 12);
        char *last = go_to_parent(name);
        if (type == '0' || type == '\0' || type == '7') {
            if (!last) { errno = EISDIR; die_restore("a file at the root", NULL); }
            clear_name(last, 0);
            int fd = openat(AT_FDCWD, last, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
            if (fd < 0) die_restore("create", last);
            copy_data(fd, size, last);
            set_owner_mode_times(fd, last, uid, gid, mode, mtime, 0);
            close(fd);
        } else if (type == '5') {
            int fd;
            if (last) {
                clear_name(last, 1);
                if (mkdir(last, 0700) != 0 && errno != EEXIST) die_restore("mkdir", last);
                fd = open(last, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            } else {
                fd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            }
            if (fd < 0) die_restore("open directory", last ? last : root);
            set_owner_mode_times(fd, last ? last : ".", uid, gid, mode, 0, 0);
            close(fd);
            copy_data(-1, size, last);
        } else if (type == '2') {
            if (!last) { errno = EINVAL; die_restore("a link at the root", NULL); }
            clear_name(last, 0);
            if (symlinkat(link, AT_FDCWD, last) != 0) die_restore("symlink", last);
            set_owner_mode_times(-1, last, uid, gid, 0, mtime, 1);
        } else {
            copy_data(-1, size, NULL); /* hard links, devices, fifos, pax records: not state */
        }
        free(name);
        free(link);
    }
    while (cur_len) free(cur[--cur_len]);
    if (chdir("/") != 0) die_restore("cannot leave the restore root", NULL);
}

/* ---- supervising ---------------------------------------------------------------- */

struct orphan { int pid; char command[160]; };
static struct orphan shown[MAX_ORPHANS_SHOWN];
static int orphan_count;
static int *seen;
static size_t seen_n, seen_cap;

static int was_seen(int pid) {
    for (size_t i = 0; i < seen_n; i++) if (seen[i] == pid) return 1;
    return 0;
}

static void record(int pid, const char *command) {
    if (was_seen(pid)) return;
    if (seen_n == seen_cap) {
        seen_cap = seen_cap ? seen_cap * 2 : 64;
        seen = realloc(seen, seen_cap * sizeof *seen);
        if (!seen) _exit(125);
    }
    seen[seen_n++] = pid;
    if (orphan_count < MAX_ORPHANS_SHOWN) {
        shown[orphan_count].pid = pid;
        snprintf(shown[orphan_count].command, sizeof shown[0].command, "%s", command);
    }
    orphan_count++;
}

static void cmdline(int pid, char *out, size_t len) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    out[0] = '\0';
    if (fd < 0) return;
    ssize_t n = read(fd, out, len - 1);
    close(fd);
    if (n <= 0) return;
    out[n] = '\0';
    for (ssize_t i = 0; i < n; i++) if (out[i] == '\0') out[i] = ' ';
}

/* Children of `parent`: /proc/PID/task/TID/children, else every /proc/N/stat. */
static size_t children_of(int parent, int **out, size_t *cap) {
    size_t n = 0;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", parent);
    DIR *tasks = opendir(path);
    int ok = 0;
    if (tasks) {
        struct dirent *t;
        while ((t = readdir(tasks)) != NULL) {
            if (t->d_name[0] == '.') continue;
            char cpath[320];
            snprintf(cpath, sizeof cpath, "/proc/%d/task/%s/children", parent, t->d_name);
            FILE *fh = fopen(cpath, "re");
            if (!fh) continue;
            ok = 1;
            int pid;
            while (fscanf(fh, "%d", &pid) == 1) {
                if (n == *cap) { *cap = *cap ? *cap * 2 : 64; *out = realloc(*out, *cap * sizeof **out); }
                (*out)[n++] = pid;
            }
            fclose(fh);
        }
        closedir(tasks);
    }
    if (ok) return n;
    DIR *proc = opendir("/proc");
    if (!proc) return 0;
    struct dirent *e;
    while ((e = readdir(proc)) != NULL) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        char spath[300], statline[512];
        snprintf(spath, sizeof spath, "/proc/%s/stat", e->d_name);
        int fd = open(spath, O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        ssize_t len = read(fd, statline, sizeof statline - 1);
        close(fd);
        if (len <= 0) continue;
        statline[len] = 0;
        char *rp = strrchr(statline, ')');
        int ppid;
        char st;
        if (rp && sscanf(rp + 2, "%c %d", &st, &ppid) == 2 && ppid == parent) {
            if (n == *cap) { *cap = *cap ? *cap * 2 : 64; *out = realloc(*out, *cap * sizeof **out); }
            (*out)[n++] = atoi(e->d_name);
        }
    }
    closedir(proc);
    return n;
}

static void kill_tree(int root) {
    int *todo = NULL, *kids = NULL;
    size_t todo_n = 0, todo_cap = 0, kids_cap = 0;
    todo = malloc(64 * sizeof *todo);
    todo_cap = 64;
    todo[todo_n++] = root;
    while (todo_n) {
        int pid = todo[--todo_n];
        size_t k = children_of(pid, &kids, &kids_cap);
        kill(pid, SIGKILL);
        for (size_t i = 0; i < k; i++) {
            if (todo_n == todo_cap) { todo_cap *= 2; todo = realloc(todo, todo_cap * sizeof *todo); }
            todo[todo_n++] = kids[i];
        }
    }
    free(todo);
    free(kids);
}

static int code_of(int status) {
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static const char *lookup(const char *prog, char *const envp[], char *buf, size_t len) {
    if (strchr(prog, '/')) return prog;
    const char *path = DEFAULT_PATH;
    for (char *const *e = envp; *e; e++) if (!strncmp(*e, "PATH=", 5)) path = *e + 5;
    while (*path) {
        const char *end = strchr(path, ':');
        size_t dir_len = end ? (size_t)(end - path) : strlen(path);
        if (dir_len > 0 && path[0] == '/' && dir_len + strlen(prog) + 2 < len) {
            snprintf(buf, len, "%.*s/%s", (int)dir_len, path, prog);
            struct stat st;
            if (stat(buf, &st) == 0 && S_ISREG(st.st_mode) && access(buf, X_OK) == 0) return buf;
        }
        if (!end) break;
        path = end + 1;
    }
    return NULL;
}

static int enter_cwd(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && (errno == ELOOP || errno == ENOTDIR)) {
        /* the agent replaced its workdir by a link or a file: as a link that leaves the
           state is dropped in fresh verification, the verifier finds an empty workdir */
        struct stat st;
        if (lstat(dir, &st) == 0 && !S_ISDIR(st.st_mode) && unlink(dir) == 0) errno = ENOENT;
    }
    if (fd < 0 && errno == ENOENT) {
        make_dirs(dir);
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (fd < 0 || fchdir(fd) != 0) return -1;
    close(fd);
    return 0;
}

static int start(char **argv, char **envp, const char *cwd) {
    pid_t pid = fork();
    if (pid != 0) return pid;
    if (cwd && enter_cwd(cwd) != 0) {
        fprintf(stderr, "supervise: cannot enter %s: %s\n", cwd, strerror(errno));
        _exit(126);
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    for (int sig = 1; sig < NSIG; sig++) signal(sig, SIG_DFL);
    char buf[4096];
    const char *path = lookup(argv[0], envp, buf, sizeof buf);
    if (!path) {
        fprintf(stderr, "supervise: %s: not found in PATH\n", argv[0]);
        _exit(127);
    }
    execve(path, argv, envp);
    fprintf(stderr, "supervise: cannot run %s: %s\n", path, strerror(errno));
    _exit(errno == ENOENT ? 127 : 126);
}

static void json_string(FILE *fh, const char *s) {
    fputc('"', fh);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        fputc(c >= 0x20 && c < 0x7f && c != '"' && c != '\\' ? c : '?', fh);
    }
    fputc('"', fh);
}

static int write_status(const char *dir, int exit_code) {
    struct stat st;
    if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        unlink(dir);
        if (mkdir(dir, 0755) != 0) return -1;
    }
    char tmp[4200], final[4200];
    snprintf(tmp, sizeof tmp, "%s/.supervisor.json.%d", dir, getpid());
    snprintf(final, sizeof final, "%s/supervisor.json", dir);
    unlink(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    FILE *fh = fdopen(fd, "w");
    if (!fh) return -1;
    fprintf(fh, "{\"exit_code\": %d, \"orphans\": [", exit_code);
    int n = orphan_count < MAX_ORPHANS_SHOWN ? orphan_count : MAX_ORPHANS_SHOWN;
    for (int i = 0; i < n; i++) {
        fprintf(fh, "%s{\"pid\": %d, \"command\": ", i ? ", " : "", shown[i].pid);
        json_string(fh, shown[i].command);
        fputc('}', fh);
    }
    fprintf(fh, "], \"orphan_count\": %d, \"outputs\": {", orphan_count);
    static const char *const watched[] = {"reward.txt", "reward.json", "ctrf.json"};
    int first = 1;
    for (size_t k = 0; k < sizeof watched / sizeof *watched; k++) {
        char path[4300];
        struct stat out;
        snprintf(path, sizeof path, "%s/%s", dir, watched[k]);
        if (lstat(path, &out) != 0) continue;
        const char *kind = S_ISREG(out.st_mode) ? "regular file" : S_ISLNK(out.st_mode)
            ? "symbolic link" : S_ISDIR(out.st_mode) ? "directory" : S_ISFIFO(out.st_mode)
            ? "FIFO" : "device or socket";
        fprintf(fh, "%s\"%s\": \"%s\"", first ? "" : ", ", watched[k], kind);
        first = 0;
    }
    fputs("}}", fh);
    if (fclose(fh) != 0) return -1;
    return rename(tmp, final);
}

static int make_home(const char *home) {
    struct stat st;
    if (lstat(home, &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            int fd = open(home, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (fd < 0 || remove_entries(fd) != 0) return -1;
            close(fd);
            return chmod(home, 0700);
        }
        if (unlink(home) != 0) return -1;
    }
    return mkdir(home, 0700);
}

int main(int argc, char **argv) {
    if (argc < 3) goto usage;
    const char *status_dir = argv[1], *untar_dir = NULL, *mkdir_dir = NULL, *home = NULL;
    const char *cwd = NULL;
    char **envp = calloc((size_t)argc + 2, sizeof *envp);
    const char **empties = calloc((size_t)argc, sizeof *empties);
    size_t env_n = 0, empty_n = 0;
    int i = 2;
    for (; i < argc && strcmp(argv[i], "--"); i += 2) {
        if (i + 1 >= argc) goto usage;
        if (!strcmp(argv[i], "--empty")) empties[empty_n++] = argv[i + 1];
        else if (!strcmp(argv[i], "--mkdir")) mkdir_dir = argv[i + 1];
        else if (!strcmp(argv[i], "--untar")) untar_dir = argv[i + 1];
        else if (!strcmp(argv[i], "--home")) home = argv[i + 1];
        else if (!strcmp(argv[i], "--cwd")) cwd = argv[i + 1];
        else if (!strcmp(argv[i], "--env")) envp[env_n++] = argv[i + 1];
        else goto usage;
    }
    if (i >= argc) goto usage;
    char **command = argv + i + 1; /* none: only the steps before it (exit 0) */

    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP && sig != SIGCHLD) signal(sig, SIG_IGN);
    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
        perror("supervise: prctl");
        return 125;
    }
    umask(022);
    for (size_t k = 0; k < empty_n; k++) empty_path(empties[k]);
    if (mkdir_dir) make_dirs(mkdir_dir);
    if (untar_dir) untar(untar_dir);
    if (home) {
        if (make_home(home) != 0) die_restore("cannot make the verifier's HOME", home);
        size_t len = strlen(home) + 6;
        char *entry = malloc(len);
        snprintf(entry, len, "HOME=%s", home);
        for (size_t k = 0; k < env_n; k++)
            if (!strncmp(envp[k], "HOME=", 5)) envp[k] = entry, entry = NULL;
        if (entry) envp[env_n++] = entry;
    }
    if (untar_dir) { /* the command's stdin is not the archive's stream */
        int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (null >= 0) { dup2(null, 0); close(null); }
    }

    if (!*command) return 0;
    pid_t child = start(command, envp, cwd);
    if (child < 0) { perror("supervise: fork"); return 125; }
    int exit_code = 125, status;
    for (;;) { /* wait for the command; any other child reaped on the way is an orphan */
        pid_t pid = wait(&status);
        if (pid < 0) { if (errno == EINTR) continue; break; }
        if (pid == child) { exit_code = code_of(status); break; }
        record(pid, "(exited)");
    }
    /* The command is done: nothing it started may outlive it. */
    int *kids = NULL;
    size_t kids_cap = 0;
    for (;;) {
        size_t n = children_of(getpid(), &kids, &kids_cap);
        for (size_t k = 0; k < n; k++) {
            char line[160];
            cmdline(kids[k], line, sizeof line);
            record(kids[k], line);
            kill_tree(kids[k]);
        }
        pid_t pid;
        while ((pid = waitpid(-1, &status, WNOHANG)) > 0) record(pid, "(exited)");
        if (n == 0 && pid < 0 && errno == ECHILD) break;
        struct timespec nap = {0, 2000000};
        nanosleep(&nap, NULL);
    }
    if (write_status(status_dir, exit_code) != 0) {
        fprintf(stderr, "supervise: cannot write the status: %s\n", strerror(errno));
        return STATUS_WRITE_FAILED;
    }
    return exit_code;

usage:
    fprintf(stderr, "usage: supervise STATUS_DIR [--empty PATH]... [--mkdir DIR] "
                    "[--untar DIR] [--home DIR] [--cwd DIR] [--env K=V]... -- ARGV...\n");
    return USAGE;
}
