/*
 * folder-walk.c - lists a folder of class folders as torchvision's
 * ImageFolder does, into the folder index format; see folder-walk.h.
 *
 * The walk uses readdir() and d_type, so that only symbolic links cost a
 * stat(). Names are sorted as Python's sorted() sorts what os.listdir()
 * decodes (so that labels match torchvision's for any bytes), folders are
 * walked as sorted(os.walk(followlinks=True)) walks them, and a link back
 * to a folder being walked is skipped rather than followed round.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fds.h"
#include "common/internal.h"
#include "common/resources.h"
#include "source/folder-walk.h"
#include "source/pack-format.h"

/* Folder trees deeper than this are refused (the loop guard keeps a
 * well-formed tree far below it). */
#define MAX_DEPTH 256

/* Longest sample name below the folder, without the terminator. */
#define MAX_NAME RF__INDEX_NAME_MAX

/* ---- growing arrays ----------------------------------------------------- */

/* Returns `array` grown (doubling) to hold at least `need` elements of
 * `size` bytes, or NULL when out of memory (then `array` is untouched). */
static void *grow_array(void *array, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return array;
    size_t bigger = *cap ? *cap * 2 : 1024;
    if (bigger < need)
        bigger = need;
    void *grown = reallocarray(array, bigger, size);
    if (grown)
        *cap = bigger;
    return grown;
}

/* NUL-terminated strings kept back to back, addressed by offset (the
 * block moves as it grows). */
struct text {
    char *data;
    size_t used, cap;
};

static int text_add(struct text *t, const char *s, size_t length,
                    uint64_t *offset)
{
    char *data = grow_array(t->data, &t->cap, t->used + length + 1, 1);
    if (!data)
        return -ENOMEM;
    t->data = data;
    memcpy(t->data + t->used, s, length);
    t->data[t->used + length] = '\0';
    *offset = t->used;
    t->used += length + 1;
    return 0;
}

/* Strings of a struct text, by their offsets. */
struct offsets {
    uint64_t *at;
    size_t count, cap;
};

static int offsets_add(struct offsets *o, struct text *t, const char *s,
                       size_t length)
{
    uint64_t *at = grow_array(o->at, &o->cap, o->count + 1, sizeof(*at));
    if (!at)
        return -ENOMEM;
    o->at = at;
    if (text_add(t, s, length, &o->at[o->count]) < 0)
        return -ENOMEM;
    o->count++;
    return 0;
}

/* Whether b is a UTF-8 continuation byte within [low, high]. */
static bool continues(unsigned char b, unsigned char low, unsigned char high)
{
    return b >= low && b <= high;
}

/* The code point Python sees at *s in a file name (decoded as UTF-8 with
 * surrogateescape), and moves *s past it. A byte that does not start a
 * valid sequence stands for itself as U+DC80..U+DCFF, as in os.listdir(). */
static uint32_t next_code_point(const unsigned char **s)
{
    const unsigned char *p = *s;
    const unsigned char b = p[0];
    unsigned length = 1;
    uint32_t cp = 0xDC00u + b;
    if (b < 0x80) {
        cp = b;
    } else if (b >= 0xC2 && b <= 0xDF && continues(p[1], 0x80, 0xBF)) {
        length = 2;
        cp = (b & 0x1Fu) << 6 | (p[1] & 0x3Fu);
    } else if (b >= 0xE0 && b <= 0xEF &&
               continues(p[1], b == 0xE0 ? 0xA0 : 0x80,
                         b == 0xED ? 0x9F : 0xBF) &&
               continues(p[2], 0x80, 0xBF)) {
        length = 3;
        cp = (b & 0x0Fu) << 12 | (p[1] & 0x3Fu) << 6 | (p[2] & 0x3Fu);
    } else if (b >= 0xF0 && b <= 0xF4 &&
               continues(p[1], b == 0xF0 ? 0x90 : 0x80,
                         b == 0xF4 ? 0x8F : 0xBF) &&
               continues(p[2], 0x80, 0xBF) && continues(p[3], 0x80, 0xBF)) {
        length = 4;
        cp = (b & 0x07u) << 18 | (p[1] & 0x3Fu) << 12 | (p[2] & 0x3Fu) << 6 |
             (p[3] & 0x3Fu);
    }
    *s = p + length;
    return cp;
}

/* Python's sorted() order of two file names: code point by code point as
 * os.listdir() decodes them. For ASCII and valid UTF-8 that is byte order;
 * a name with other bytes (Latin-1, say) sorts where torchvision puts it,
 * so the class labels match. */
static int compare_names(const char *a, const char *b)
{
    const unsigned char *x = (const unsigned char *)a;
    const unsigned char *y = (const unsigned char *)b;
    while (*x && *y) {
        const uint32_t cx = next_code_point(&x), cy = next_code_point(&y);
        if (cx != cy)
            return cx < cy ? -1 : 1;
    }
    return (*x != 0) - (*y != 0);
}

/* qsort_r() comparator of text offsets, in Python's sorted() order. */
static int compare_text_offsets(const void *a, const void *b, void *text)
{
    const char *base = text;
    return compare_names(base + *(const uint64_t *)a,
                         base + *(const uint64_t *)b);
}

/* ---- listing a folder --------------------------------------------------- */

/* A folder found below a class folder, and its image files: the slice
 * [first_file, first_file + files) of walker.files. */
struct walk_dir {
    uint64_t path; /* text offset of its path below the root */
    uint32_t path_length;
    uint32_t label;
    size_t first_file, files;
    uint64_t dev, ino; /* the folder the walk read, by its open fd */
};

struct walk_file {
    uint64_t name; /* text offset of the file name alone */
    uint32_t length;
};

struct walker {
    int root_fd;
    const char *root;
    struct text text;
    struct offsets classes; /* the class folder names, sorted */
    struct walk_dir *dirs;
    size_t dir_count, dir_cap;
    struct walk_file *files;
    size_t file_count, file_cap;
    struct stat ancestors[MAX_DEPTH]; /* the folders being walked */
    unsigned depth;
    char path[MAX_NAME + 1]; /* the folder being walked, below the root */
    size_t path_length;
    char *why;
    size_t why_len;
};

static int walk_no_memory(struct walker *w)
{
    rf__format(w->why, w->why_len,
               "%s: out of memory while listing it (%zu files so far)", w->root,
               w->file_count);
    return -ENOMEM;
}

/* What to change after a failed call: the process's limits when the
 * kernel ran out of something, else the dataset. */
static void advise(int error, char *out, size_t len)
{
    if (!rf__advise_on_exhaustion(error, out, len))
        rf__format(out, len, "fix it or move it out of the dataset");
}

/* The room a failing path may have: the dataset's folder, the folder
 * below it and a name in it. */
#define FAILED_PATH_MAX (2 * (MAX_NAME + 1) + 256)

/* A failed system call on the folder being walked (or `name` in it). A
 * long path gives way in its middle, so that the reason and the advice
 * after it always fit: in half of w->why, since callers put their own
 * words before it in a buffer of the same size ("cannot open dataset
 * '/data/train': ..."). */
static int walk_failed(struct walker *w, const char *what, const char *name,
                       int error)
{
    char path[FAILED_PATH_MAX];
    rf__format(path, sizeof(path), "%s%s%s%s%s", w->root,
               w->path_length ? "/" : "", w->path, name ? "/" : "",
               name ? name : "");
    char advice[200];
    advise(error, advice, sizeof(advice));
    char reason[320];
    rf__format(reason, sizeof(reason), ": %s: %s; %s", what, strerror(error),
               advice);
    const size_t reason_length = strlen(reason);
    const size_t target = w->why_len / 2;
    size_t room = target > reason_length + 64 ? target - reason_length : 64;
    if (room > sizeof(path))
        room = sizeof(path);
    char shown[FAILED_PATH_MAX];
    rf__copy_elided(shown, room, path);
    rf__format(w->why, w->why_len, "%s%s", shown, reason);
    return -error;
}

/* Lower case for A to Z only, whatever the locale says (as Python's
 * str.lower() does for ASCII): folding other bytes with | 0x20 would
 * make 0x0E a '.'. */
static char ascii_lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/* torchvision's IMG_EXTENSIONS, compared as path.lower().endswith(). */
static bool has_image_extension(const char *name, size_t length)
{
    static const char *const extensions[] = {".jpg", ".jpeg", ".png",
                                             ".ppm", ".bmp",  ".pgm",
                                             ".tif", ".tiff", ".webp"};
    for (size_t i = 0; i < sizeof(extensions) / sizeof(*extensions); i++) {
        const size_t n = strlen(extensions[i]);
        if (length < n)
            continue;
        size_t k = 0;
        while (k < n && ascii_lower(name[length - n + k]) == extensions[i][k])
            k++;
        if (k == n)
            return true;
    }
    return false;
}

/* Whether an entry is a folder, following symbolic links as os.scandir's
 * is_dir() does: d_type answers for all but links (and file systems that
 * do not fill it), so a listing costs no stat() per file. A dangling link
 * is not a folder: torchvision lists it as a file. */
static bool entry_is_folder(int dir_fd, const struct dirent *de)
{
    struct stat st;
    if (de->d_type == DT_DIR)
        return true;
    if (de->d_type != DT_LNK && de->d_type != DT_UNKNOWN)
        return false;
    return fstatat(dir_fd, de->d_name, &st, 0) == 0 && S_ISDIR(st.st_mode);
}

static int add_file(struct walker *w, const char *name, size_t length)
{
    struct walk_file *files =
        grow_array(w->files, &w->file_cap, w->file_count + 1, sizeof(*files));
    if (!files)
        return walk_no_memory(w);
    w->files = files;
    struct walk_file *f = &w->files[w->file_count];
    if (text_add(&w->text, name, length, &f->name) < 0)
        return walk_no_memory(w);
    f->length = (uint32_t)length;
    w->file_count++;
    return 0;
}

/* Records the folder being walked; returns its position in w->dirs (the
 * array moves as it grows, so positions are kept, not pointers). */
static int add_dir(struct walker *w, uint32_t label, size_t *position)
{
    struct walk_dir *dirs =
        grow_array(w->dirs, &w->dir_cap, w->dir_count + 1, sizeof(*dirs));
    if (!dirs)
        return walk_no_memory(w);
    w->dirs = dirs;
    struct walk_dir *d = &w->dirs[w->dir_count];
    if (text_add(&w->text, w->path, w->path_length, &d->path) < 0)
        return walk_no_memory(w);
    d->path_length = (uint32_t)w->path_length;
    d->label = label;
    d->first_file = w->file_count;
    d->files = 0;
    *position = w->dir_count++;
    return 0;
}

/* Reads one folder: image files go to w->files (contiguous, since this
 * folder's entries are read in one go), subfolders to *subfolders. */
static int read_entries(struct walker *w, DIR *dir, struct offsets *subfolders)
{
    for (;;) {
        errno = 0;
        const struct dirent *de = readdir(dir);
        if (!de)
            break;
        if (rf__is_dot_or_dotdot(de->d_name))
            continue;
        const size_t length = strlen(de->d_name);
        int rc = 0;
        if (entry_is_folder(dirfd(dir), de))
            rc = offsets_add(subfolders, &w->text, de->d_name, length);
        else if (has_image_extension(de->d_name, length))
            rc = add_file(w, de->d_name, length);
        if (rc < 0)
            return walk_no_memory(w);
    }
    return errno ? walk_failed(w, "cannot read the folder", NULL, errno) : 0;
}

static int compare_files(const void *a, const void *b, void *text)
{
    const char *base = text;
    return compare_names(base + ((const struct walk_file *)a)->name,
                         base + ((const struct walk_file *)b)->name);
}

/* torchvision sorts the file names of each folder on their own. */
static void sort_files(struct walker *w, size_t position)
{
    struct walk_dir *d = &w->dirs[position];
    d->files = w->file_count - d->first_file;
    if (d->files < 2)
        return; /* nothing to sort, and w->files may still be NULL */
    qsort_r(w->files + d->first_file, d->files, sizeof(*w->files),
            compare_files, w->text.data);
}

/* A symbolic link back to a folder being walked would make os.walk go
 * round until the kernel refuses the path (ELOOP); such a folder is
 * skipped instead. */
static bool is_being_walked(const struct walker *w, const struct stat *st)
{
    for (unsigned i = 0; i < w->depth; i++)
        if (w->ancestors[i].st_dev == st->st_dev &&
            w->ancestors[i].st_ino == st->st_ino)
            return true;
    return false;
}

static int walk_folder(struct walker *w, int fd, uint32_t label);

/* Walks each subfolder, with w->path extended by its name. */
static int walk_subfolders(struct walker *w, DIR *dir,
                           const struct offsets *subfolders, uint32_t label)
{
    const size_t parent_length = w->path_length;
    for (size_t i = 0; i < subfolders->count; i++) {
        const char *name = w->text.data + subfolders->at[i];
        const size_t length = strlen(name);
        if (parent_length + 1 + length > MAX_NAME)
            return walk_failed(w, "cannot list it", name, ENAMETOOLONG);
        const int fd = rf__fd_off_stdio(
            openat(dirfd(dir), name, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (fd < 0)
            return walk_failed(w, "cannot open it", name, errno);
        w->path[parent_length] = '/';
        memcpy(w->path + parent_length + 1, name, length + 1);
        w->path_length = parent_length + 1 + length;
        const int rc = walk_folder(w, fd, label);
        w->path_length = parent_length;
        w->path[parent_length] = '\0';
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Lists the folder open at fd (which it closes) and, recursively, its
 * subfolders, as os.walk(followlinks=True) does. */
static int walk_folder(struct walker *w, int fd, uint32_t label)
{
    struct stat st;
    struct offsets subfolders = {0};
    size_t position;
    DIR *dir = NULL;
    int rc =
        fstat(fd, &st) < 0 ? walk_failed(w, "cannot stat", NULL, errno) : 0;
    if (rc < 0 || is_being_walked(w, &st))
        goto out;
    if (w->depth == MAX_DEPTH) {
        rc = walk_failed(w, "cannot list it", NULL, ELOOP);
        goto out;
    }
    dir = fdopendir(fd);
    if (!dir) {
        rc = walk_failed(w, "cannot open it", NULL, errno);
        goto out;
    }
    fd = -1; /* the DIR owns it now */
    w->ancestors[w->depth++] = st;
    rc = add_dir(w, label, &position);
    if (rc == 0) {
        w->dirs[position].dev = (uint64_t)st.st_dev;
        w->dirs[position].ino = (uint64_t)st.st_ino;
        rc = read_entries(w, dir, &subfolders);
    }
    if (rc == 0) {
        sort_files(w, position);
        rc = walk_subfolders(w, dir, &subfolders, label);
    }
    w->depth--;
out:
    free(subfolders.at);
    if (dir)
        closedir(dir);
    if (fd >= 0)
        close(fd);
    return rc;
}

/* Files right below the root belong to no class and are left out. */
static int read_entries_of_root(struct walker *w, DIR *dir)
{
    for (;;) {
        errno = 0;
        const struct dirent *de = readdir(dir);
        if (!de)
            break;
        if (rf__is_dot_or_dotdot(de->d_name) ||
            !entry_is_folder(dirfd(dir), de))
            continue;
        if (offsets_add(&w->classes, &w->text, de->d_name, strlen(de->d_name)) <
            0)
            return walk_no_memory(w);
    }
    return errno ? walk_failed(w, "cannot read the folder", NULL, errno) : 0;
}

/* The class folders: the folders (or links to folders) right below the
 * root, sorted, as torchvision's find_classes(). */
static int list_classes(struct walker *w)
{
    const int fd = rf__fd_off_stdio(
        openat(w->root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    DIR *dir = fd < 0 ? NULL : fdopendir(fd);
    if (!dir) {
        const int error = errno;
        if (fd >= 0)
            close(fd);
        return walk_failed(w, "cannot open it", NULL, error);
    }
    int rc = read_entries_of_root(w, dir);
    closedir(dir);
    if (rc < 0)
        return rc;
    if (w->classes.count == 0) {
        rf__format(w->why, w->why_len,
                   "%s: no class folders in it; a dataset folder holds one "
                   "folder of images per class, as torchvision's "
                   "ImageFolder reads",
                   w->root);
        return -ENOENT;
    }
    qsort_r(w->classes.at, w->classes.count, sizeof(*w->classes.at),
            compare_text_offsets, w->text.data);
    return 0;
}

/* Walks every class folder; label = the class's position. */
static int walk_classes(struct walker *w)
{
    for (size_t label = 0; label < w->classes.count; label++) {
        const char *name = w->text.data + w->classes.at[label];
        w->path_length = strlen(name);
        if (w->path_length > MAX_NAME)
            return walk_failed(w, "cannot list it", NULL, ENAMETOOLONG);
        memcpy(w->path, name, w->path_length + 1);
        const int fd = rf__fd_off_stdio(
            openat(w->root_fd, w->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (fd < 0)
            return walk_failed(w, "cannot open it", NULL, errno);
        const int rc = walk_folder(w, fd, (uint32_t)label);
        if (rc < 0)
            return rc;
    }
    w->path_length = 0;
    w->path[0] = '\0';
    return 0;
}

/* torchvision refuses a class folder without images (FileNotFoundError
 * "Found no valid file for the classes ..."), and so do we: it is
 * usually a wrong path or a copy that did not finish. */
static int check_no_empty_class(struct walker *w)
{
    bool *has_files = calloc(w->classes.count, sizeof(*has_files));
    if (!has_files)
        return walk_no_memory(w);
    for (size_t d = 0; d < w->dir_count; d++)
        if (w->dirs[d].files > 0)
            has_files[w->dirs[d].label] = true;
    char names[512] = "";
    size_t empty = 0, used = 0;
    for (size_t label = 0; label < w->classes.count; label++) {
        if (has_files[label])
            continue;
        if (used < sizeof(names))
            used += (size_t)snprintf(names + used, sizeof(names) - used,
                                     "%s'%s'", empty ? ", " : "",
                                     w->text.data + w->classes.at[label]);
        empty++;
    }
    free(has_files);
    if (empty == 0)
        return 0;
    rf__format(w->why, w->why_len,
               "%s: %zu class folder%s without image files: %s; images end "
               "in .jpg .jpeg .png .ppm .bmp .pgm .tif .tiff or .webp (any "
               "case), as for torchvision's ImageFolder: add images or "
               "remove the folder%s",
               w->root, empty, empty == 1 ? "" : "s", names,
               empty == 1 ? "" : "s");
    return -ENOENT;
}

/* torchvision walks sorted(os.walk(class_dir)): folders in the order of
 * their path strings, which is not a depth-first order ("a-b" sorts
 * between "a" and "a/x", since '-' < '/'). */
static int compare_dirs(const void *a, const void *b, void *text)
{
    const struct walk_dir *x = a, *y = b;
    if (x->label != y->label)
        return x->label < y->label ? -1 : 1;
    return compare_names((const char *)text + x->path,
                         (const char *)text + y->path);
}

/* Writes entries and names ("folder/below/file.jpg") into the listing. */
static void fill_listing(const struct walker *w, uint8_t *entries, char *names)
{
    uint64_t at = 0;
    for (size_t d = 0; d < w->dir_count; d++) {
        const struct walk_dir *dir = &w->dirs[d];
        const char *path = w->text.data + dir->path;
        for (size_t f = dir->first_file; f < dir->first_file + dir->files;
             f++) {
            const struct walk_file *file = &w->files[f];
            const struct rf__index_entry e = {.name_offset = at,
                                              .label = dir->label,
                                              .name_length = dir->path_length +
                                                             1 + file->length};
            rf__index_entry_encode(&e, entries);
            entries += RF__INDEX_ENTRY_SIZE;
            memcpy(names + at, path, dir->path_length);
            names[at + dir->path_length] = '/';
            memcpy(names + at + dir->path_length + 1, w->text.data + file->name,
                   file->length + 1);
            at += e.name_length + 1;
        }
    }
}

static int build_listing(struct walker *w, const struct rf__crc32c *crc,
                         uint8_t **out, size_t *out_size)
{
    qsort_r(w->dirs, w->dir_count, sizeof(*w->dirs), compare_dirs,
            w->text.data);
    struct rf__index_header h = {.version = RF__INDEX_VERSION,
                                 .header_size = RF__INDEX_HEADER_SIZE,
                                 .entry_size = RF__INDEX_ENTRY_SIZE,
                                 .classes = (uint32_t)w->classes.count,
                                 .samples = w->file_count};
    for (size_t d = 0; d < w->dir_count; d++)
        h.names_size += (uint64_t)w->dirs[d].files *
                        (w->dirs[d].path_length + 2); /* '/' and NUL */
    for (size_t f = 0; f < w->file_count; f++)
        h.names_size += w->files[f].length;
    h.names_offset = RF__INDEX_HEADER_SIZE + h.samples * RF__INDEX_ENTRY_SIZE;
    h.total_size = h.names_offset + h.names_size;
    uint8_t *listing = malloc(h.total_size);
    if (!listing)
        return walk_no_memory(w);
    fill_listing(w, listing + RF__INDEX_HEADER_SIZE,
                 (char *)listing + h.names_offset);
    h.body_crc = rf__crc32c(crc, 0, listing + RF__INDEX_HEADER_SIZE,
                            h.total_size - RF__INDEX_HEADER_SIZE);
    rf__index_header_encode(&h, listing);
    *out = listing;
    *out_size = h.total_size;
    return 0;
}

/* The path of every folder walked, NUL-terminated, back to back; and the
 * device and inode of the root, then of each of them, as walked. */
static int list_walked_folders(struct walker *w, struct rf__walked *out)
{
    size_t size = 0;
    for (size_t d = 0; d < w->dir_count; d++)
        size += w->dirs[d].path_length + 1;
    char *names = malloc(size ? size : 1);
    uint64_t *ids = malloc(2 * (w->dir_count + 1) * sizeof(*ids));
    struct stat root;
    if (!names || !ids || fstat(w->root_fd, &root) < 0) {
        free(names);
        free(ids);
        return walk_no_memory(w);
    }
    ids[0] = (uint64_t)root.st_dev;
    ids[1] = (uint64_t)root.st_ino;
    size_t at = 0;
    for (size_t d = 0; d < w->dir_count; d++) {
        memcpy(names + at, w->text.data + w->dirs[d].path,
               w->dirs[d].path_length + 1);
        at += w->dirs[d].path_length + 1;
        ids[2 * d + 2] = w->dirs[d].dev;
        ids[2 * d + 3] = w->dirs[d].ino;
    }
    *out = (struct rf__walked){
        .names = names, .names_size = size, .ids = ids, .count = w->dir_count};
    return 0;
}

static void walker_free(struct walker *w)
{
    free(w->text.data);
    free(w->classes.at);
    free(w->dirs);
    free(w->files);
    free(w);
}

/* Lists the folder open at root_fd into a malloc'd listing in the folder
 * index format. Reads folders only, never the files. */
int rf__folder_list(int root_fd, const char *root, const struct rf__crc32c *crc,
                    uint8_t **listing, size_t *size, struct rf__walked *walked,
                    char *why, size_t why_len)
{
    struct walker *w = calloc(1, sizeof(*w));
    if (!w) {
        rf__format(why, why_len, "%s: out of memory", root);
        return -ENOMEM;
    }
    w->root_fd = root_fd;
    w->root = root;
    w->why = why;
    w->why_len = why_len;
    int rc = list_classes(w);
    if (rc == 0)
        rc = walk_classes(w);
    if (rc == 0)
        rc = check_no_empty_class(w);
    if (rc == 0)
        rc = build_listing(w, crc, listing, size);
    if (rc == 0) {
        rc = list_walked_folders(w, walked);
        if (rc < 0)
            free(*listing);
    }
    walker_free(w);
    return rc;
}
