/*
 * dataset.c - rf_dataset: the samples of a folder of class folders (with
 * torchvision ImageFolder's classes, labels and order) or of a packed
 * file, read by index.
 *
 * A folder is listed once, with readdir() and d_type so that only
 * symbolic links cost a stat(), into the folder index format of lib/pack.h
 * (one block: header, entries, names). The consumer hands that block to
 * its producers in a sealed memfd, and they map it instead of listing the
 * folder again. A packed file's index, names and dictionary are read
 * once with pread() into a sealed memfd (handed to producers the same
 * way), mapped read-only and checked at open, so that a file truncated
 * under a reader is an error, never a SIGBUS; payloads are read with
 * pread() and checked against their CRC-32C on every read.
 * rf_dataset_decode() is in lib/decode.c.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fds.h"
#include "common/internal.h"
#include "source/dataset.h"
#include "source/pack.h"

/* What makes a memfd of metadata safe to map: it can neither shrink
 * (SIGBUS) nor change. */
#define METADATA_SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE)

/* Folder trees deeper than this are refused (the loop guard keeps a
 * well-formed tree far below it). */
#define MAX_DEPTH 256

/* Longest sample name below the folder, without the terminator. */
#define MAX_NAME 4095

enum dataset_kind { DATASET_FOLDER, DATASET_PACK };

struct rf_dataset {
    enum dataset_kind kind;
    char *path;
    int fd; /* the folder (names are opened relative to it) or the file */
    uint64_t samples;
    uint32_t classes;
    /* Folder: the listing in the folder index format; malloc'd when it
     * was listed here, mapped when it came from an index fd. */
    uint8_t *listing;
    size_t listing_size;
    bool listing_mapped;
    /* Folder listed here: the path below it of every folder walked, each
     * NUL-terminated (for the index cache); NULL otherwise. */
    struct rf__walked walked; /* listed here: the folders walked */
    /* Packed file: the header and the mapping of its metadata. */
    struct rf__pack_header header;
    int meta_fd; /* sealed memfd holding a copy of them, or -1 */
    uint8_t *meta_map;
    size_t meta_map_size;
    const uint8_t *dict;
    /* Both: encoded index entries and the names they point into. */
    const uint8_t *entries;
    const char *names;
    uint64_t names_size;
    /* The last sample read, reused (grown, never shrunk). */
    uint8_t *buffer;
    size_t buffer_size;
    struct rf__crc32c crc;
    char name[48]; /* "packed offset N" for a sample without a name */
    char error[RF__DETAIL];
};

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

/* A failed system call on the folder being walked (or `name` in it). */
static int walk_failed(struct walker *w, const char *what, const char *name,
                       int error)
{
    rf__format(w->why, w->why_len,
               "%s%s%s%s%s: %s: %s; fix it or move it out of the dataset",
               w->root, w->path_length ? "/" : "", w->path, name ? "/" : "",
               name ? name : "", what, strerror(error));
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
static int list_folder(int root_fd, const char *root,
                       const struct rf__crc32c *crc, uint8_t **listing,
                       size_t *size, struct rf__walked *walked, char *why,
                       size_t why_len)
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

/* ---- checking a listing from an index fd -------------------------------- */

/* A name from an index must stay inside the folder: relative and without
 * ".." components, so that a damaged or planted index cannot make a
 * producer read files elsewhere. */
static bool name_stays_inside(const char *name, size_t length)
{
    if (length == 0 || name[0] == '/')
        return false;
    for (size_t start = 0; start < length;) {
        size_t end = start;
        while (end < length && name[end] != '/')
            end++;
        if (end - start == 2 && name[start] == '.' && name[start + 1] == '.')
            return false;
        start = end + 1;
    }
    return true;
}

/* Whether the name is inside the names area, ends with its NUL and holds
 * no other. */
static bool name_is_whole(const char *names, uint64_t names_size,
                          uint64_t offset, uint32_t length)
{
    return offset < names_size && length < names_size - offset &&
           names[offset + length] == '\0' &&
           memchr(names + offset, '\0', length) == NULL;
}

static const char *listing_entry_problem(const struct rf__index_header *h,
                                         const char *names,
                                         const struct rf__index_entry *e)
{
    if (e->label >= h->classes)
        return "its label is not below the number of classes";
    if (e->name_length > MAX_NAME)
        return "its name is longer than 4095 bytes";
    if (!name_is_whole(names, h->names_size, e->name_offset, e->name_length))
        return "its name lies outside the names area";
    if (!name_stays_inside(names + e->name_offset, e->name_length))
        return "its name leads out of the folder";
    return NULL;
}

static int check_listing_entries(const struct rf__index_header *h,
                                 const uint8_t *listing, char *why,
                                 size_t why_len)
{
    const char *names = (const char *)listing + h->names_offset;
    for (uint64_t i = 0; i < h->samples; i++) {
        struct rf__index_entry e;
        rf__index_entry_decode(&e, listing + RF__INDEX_HEADER_SIZE +
                                       i * RF__INDEX_ENTRY_SIZE);
        const char *problem = listing_entry_problem(h, names, &e);
        if (problem) {
            rf__format(why, why_len,
                       "entry %llu: %s (label %u, name at %llu, %u bytes)",
                       (unsigned long long)i, problem, e.label,
                       (unsigned long long)e.name_offset, e.name_length);
            return -1;
        }
    }
    return 0;
}

/* Checks everything a reader relies on: header, sizes, checksum, and
 * that every entry's name lies inside the names area. */
static int check_listing(const uint8_t *listing, size_t size,
                         const struct rf__crc32c *crc, char *why,
                         size_t why_len)
{
    struct rf__index_header h;
    if (size < RF__INDEX_HEADER_SIZE) {
        rf__format(why, why_len, "it has %zu bytes, less than a header", size);
        return -1;
    }
    if (rf__index_header_decode(&h, listing, why, why_len) < 0)
        return -1;
    const uint64_t room = (size - RF__INDEX_HEADER_SIZE) / RF__INDEX_ENTRY_SIZE;
    if (h.total_size != size || h.samples > room ||
        h.names_offset !=
            RF__INDEX_HEADER_SIZE + h.samples * RF__INDEX_ENTRY_SIZE ||
        h.names_size != size - h.names_offset) {
        rf__format(why, why_len,
                   "its header says %llu samples, names at %llu (%llu bytes) "
                   "and %llu bytes in all, but it has %zu bytes",
                   (unsigned long long)h.samples,
                   (unsigned long long)h.names_offset,
                   (unsigned long long)h.names_size,
                   (unsigned long long)h.total_size, size);
        return -1;
    }
    if (rf__crc32c(crc, 0, listing + RF__INDEX_HEADER_SIZE,
                   size - RF__INDEX_HEADER_SIZE) != h.body_crc) {
        rf__format(why, why_len, "its checksum does not match");
        return -1;
    }
    return check_listing_entries(&h, listing, why, why_len);
}

/* Points the dataset at a listing (already checked) that it now owns. */
static void use_listing(rf_dataset *ds, uint8_t *listing, size_t size,
                        bool mapped)
{
    ds->listing = listing;
    ds->listing_size = size;
    ds->listing_mapped = mapped;
    ds->samples = rf__get_le64(listing + 24);
    ds->classes = rf__get_le32(listing + 20);
    ds->entries = listing + RF__INDEX_HEADER_SIZE;
    ds->names = (const char *)listing + rf__get_le64(listing + 32);
    ds->names_size = rf__get_le64(listing + 40);
}

static int map_listing(rf_dataset *ds, int index_fd, char *why, size_t why_len)
{
    struct stat st;
    if (fstat(index_fd, &st) < 0 || st.st_size <= 0) {
        rf__format(why, why_len,
                   "%s: the listing handed over (fd %d) "
                   "cannot be read",
                   ds->path, index_fd);
        return -EBADF;
    }
    const size_t size = (size_t)st.st_size;
    void *map = mmap(NULL, size, PROT_READ, MAP_SHARED, index_fd, 0);
    if (map == MAP_FAILED) {
        const int rc = -errno;
        rf__format(why, why_len, "%s: cannot map its listing (fd %d): %s",
                   ds->path, index_fd, strerror(errno));
        return rc;
    }
    char reason[RF__DETAIL / 2];
    if (check_listing(map, size, &ds->crc, reason, sizeof(reason)) < 0) {
        munmap(map, size);
        rf__format(why, why_len,
                   "%s: its listing (fd %d) is refused: %s; list the folder "
                   "again (delete its index cache file, if it has one)",
                   ds->path, index_fd, reason);
        return RF_E_CORRUPT_SAMPLE;
    }
    use_listing(ds, map, size, true);
    return 0;
}

static int open_folder(rf_dataset *ds, int index_fd, char *why, size_t why_len)
{
    ds->kind = DATASET_FOLDER;
    if (index_fd >= 0)
        return map_listing(ds, index_fd, why, why_len);
    uint8_t *listing = NULL;
    size_t size = 0;
    const int rc = list_folder(ds->fd, ds->path, &ds->crc, &listing, &size,
                               &ds->walked, why, why_len);
    if (rc == 0)
        use_listing(ds, listing, size, false);
    return rc;
}

/* ---- opening a packed file ---------------------------------------------- */

/* file_size, and the index: after the header and inside the file. Every
 * size a header gives is compared with the file's real size (fstat)
 * before anything is read or allocated, so that a damaged header costs
 * nothing; and every offset is checked before it is subtracted, so that
 * no difference wraps. */
static int check_pack_index_area(const struct rf__pack_header *h, uint64_t size,
                                 char *why, size_t why_len)
{
    if (h->file_size != size) {
        rf__format(
            why, why_len,
            "its header's file_size is %llu bytes, but the file has %llu (%s)",
            (unsigned long long)h->file_size, (unsigned long long)size,
            size < h->file_size ? "truncated" : "something was appended to it");
        return -1;
    }
    if (h->index_offset < h->header_size || h->index_offset > size) {
        rf__format(why, why_len,
                   "its header's index_offset %llu is not between the end of "
                   "its header (%u) and the end of the file (%llu bytes)",
                   (unsigned long long)h->index_offset, h->header_size,
                   (unsigned long long)size);
        return -1;
    }
    const uint64_t room = (size - h->index_offset) / h->entry_size;
    if (h->samples > room) {
        rf__format(why, why_len,
                   "its header's samples, %llu index entries of %u bytes at "
                   "index_offset %llu, do not fit its %llu bytes (room for "
                   "%llu)",
                   (unsigned long long)h->samples, h->entry_size,
                   (unsigned long long)h->index_offset,
                   (unsigned long long)size, (unsigned long long)room);
        return -1;
    }
    const uint64_t index_end = h->index_offset + h->samples * h->entry_size;
    if (h->names_offset != index_end) {
        rf__format(why, why_len,
                   "its header's names_offset %llu is not where its index "
                   "ends (%llu)",
                   (unsigned long long)h->names_offset,
                   (unsigned long long)index_end);
        return -1;
    }
    return 0;
}

/* The names follow the index, within the file and within 4096 bytes a
 * sample. names_offset <= size is known. */
static int check_pack_names_area(const struct rf__pack_header *h, uint64_t size,
                                 char *why, size_t why_len)
{
    const uint64_t room = size - h->names_offset;
    if (h->names_size > room) {
        rf__format(why, why_len,
                   "its header's names_size, %llu bytes at names_offset %llu, "
                   "runs past the end of the file: it has %llu bytes after it",
                   (unsigned long long)h->names_size,
                   (unsigned long long)h->names_offset,
                   (unsigned long long)room);
        return -1;
    }
    if (h->names_size > 0 &&
        (h->names_size - 1) / (RF__PACK_NAME_MAX + 1) >= h->samples) {
        rf__format(why, why_len,
                   "its header's names_size, %llu bytes, is more than %u "
                   "bytes for each of its %llu samples",
                   (unsigned long long)h->names_size, RF__PACK_NAME_MAX + 1,
                   (unsigned long long)h->samples);
        return -1;
    }
    return 0;
}

/* The dictionary follows the names and ends the file, within
 * RF__PACK_DICT_MAX. The names are known to end inside the file. */
static int check_pack_dict_area(const struct rf__pack_header *h, uint64_t size,
                                char *why, size_t why_len)
{
    const uint64_t names_end = h->names_offset + h->names_size;
    if (h->dict_offset != names_end) {
        rf__format(why, why_len,
                   "its header's dict_offset %llu is not where its names end "
                   "(%llu)",
                   (unsigned long long)h->dict_offset,
                   (unsigned long long)names_end);
        return -1;
    }
    if (h->dict_size != size - h->dict_offset) {
        rf__format(why, why_len,
                   "its header's dict_size, %llu bytes at dict_offset %llu, "
                   "does not end the file: it has %llu bytes after it",
                   (unsigned long long)h->dict_size,
                   (unsigned long long)h->dict_offset,
                   (unsigned long long)(size - h->dict_offset));
        return -1;
    }
    if (h->dict_size > RF__PACK_DICT_MAX) {
        rf__format(why, why_len,
                   "its header's dict_size, %llu bytes, is more than the %llu "
                   "(64 MiB) a dictionary may have",
                   (unsigned long long)h->dict_size,
                   (unsigned long long)RF__PACK_DICT_MAX);
        return -1;
    }
    return 0;
}

/* Bit 0 of flags says there are names, bit 1 that there is a dictionary. */
static int check_pack_flags(const struct rf__pack_header *h, char *why,
                            size_t why_len)
{
    if (!(h->flags & RF__PACK_FLAG_NAMES) == !h->names_size &&
        !(h->flags & RF__PACK_FLAG_DICT) == !h->dict_size)
        return 0;
    rf__format(why, why_len,
               "its header's flags 0x%x do not match its names_size %llu and "
               "dict_size %llu",
               h->flags, (unsigned long long)h->names_size,
               (unsigned long long)h->dict_size);
    return -1;
}

/* The areas the header names must tile the file exactly: payloads from
 * the header to the index, then index, names and dictionary to the end. */
static int check_pack_areas(const struct rf__pack_header *h, uint64_t size,
                            char *why, size_t why_len)
{
    if (check_pack_index_area(h, size, why, why_len) < 0 ||
        check_pack_names_area(h, size, why, why_len) < 0 ||
        check_pack_dict_area(h, size, why, why_len) < 0 ||
        check_pack_flags(h, why, why_len) < 0)
        return RF__FORMAT_DAMAGED;
    return 0;
}

static bool entry_is_zeros(const struct rf__pack_entry *e)
{
    return !e->offset && !e->name_offset && !e->label && !e->size && !e->crc &&
           !e->name_length && !e->kind;
}

/* What is wrong with an index entry, its name aside (that needs the
 * names area, which follows the index); NULL when nothing is. */
static const char *pack_entry_problem(const struct rf__pack_header *h,
                                      const struct rf__pack_entry *e)
{
    if (entry_is_zeros(e))
        return "it is all zeros (a hole in a sparse file, or zeroed damage)";
    if (e->kind != RF_SAMPLE_JPEG && e->kind != RF_SAMPLE_ZSTD)
        return "its kind is unknown";
    if (e->kind == RF_SAMPLE_ZSTD && h->channels == 0)
        return "it is zstd but the file has no sample shape";
    if (e->offset < h->header_size || e->offset > h->index_offset ||
        e->size > h->index_offset - e->offset)
        return "its payload lies outside the payload area";
    if (e->size > RF__SAMPLE_MAX)
        return "its payload is larger than the " RF__SAMPLE_MAX_TEXT
               " a sample may have, in a pack as in a folder";
    if (e->label < 0 || e->label >= (int64_t)h->classes)
        return "its label is outside 0..classes-1";
    if (e->name_length > RF__PACK_NAME_MAX)
        return "its name is longer than 4095 bytes";
    return NULL;
}

/* "index entry N: PROBLEM (its fields)" into why. */
static void describe_entry_problem(uint64_t i, const struct rf__pack_entry *e,
                                   const char *problem, char *why,
                                   size_t why_len)
{
    if (entry_is_zeros(e)) { /* the fields would say nothing more */
        rf__format(why, why_len, "index entry %llu: %s", (unsigned long long)i,
                   problem);
        return;
    }
    rf__format(why, why_len,
               "index entry %llu: %s (offset %llu, %u bytes, kind %u, label "
               "%lld, name at %llu, %u bytes)",
               (unsigned long long)i, problem, (unsigned long long)e->offset,
               e->size, e->kind, (long long)e->label,
               (unsigned long long)e->name_offset, e->name_length);
}

/* Every entry, names included, once the metadata is mapped; and classes,
 * which must be the largest label + 1. */
static int check_pack_entries(const rf_dataset *ds, char *why, size_t why_len)
{
    int64_t largest = -1;
    for (uint64_t i = 0; i < ds->samples; i++) {
        struct rf__pack_entry e;
        rf__pack_entry_decode(&e, ds->entries + i * RF__PACK_ENTRY_SIZE);
        const char *problem = pack_entry_problem(&ds->header, &e);
        if (!problem && e.name_length &&
            !name_is_whole(ds->names, ds->names_size, e.name_offset,
                           e.name_length))
            problem = "its name lies outside the names area";
        if (problem) {
            describe_entry_problem(i, &e, problem, why, why_len);
            return -1;
        }
        largest = e.label > largest ? e.label : largest;
    }
    if ((int64_t)ds->classes == largest + 1)
        return 0;
    rf__format(why, why_len,
               "its header's classes is %u, but its largest label is %lld "
               "(classes must be the largest label + 1)",
               ds->classes, (long long)largest);
    return -1;
}

/* The entries of a piece of metadata checked as it is read, all but their
 * names: a damaged index (a sparse file's hole reads as entries of zeros)
 * is refused at its first bad entry, not after all of it was read. */
struct piece_check {
    const struct rf__pack_header *header;
    char *why;
    size_t why_len;
};

_Static_assert(RF__COPY_PIECE % RF__PACK_ENTRY_SIZE == 0,
               "a piece holds whole index entries");

static int check_piece_entries(void *ctx, const uint8_t *data, uint64_t at,
                               size_t size)
{
    const struct piece_check *c = ctx;
    const uint64_t index_size = c->header->samples * RF__PACK_ENTRY_SIZE;
    for (uint64_t o = at; o < at + size && o < index_size;
         o += RF__PACK_ENTRY_SIZE) {
        struct rf__pack_entry e;
        rf__pack_entry_decode(&e, data + (o - at));
        const char *problem = pack_entry_problem(c->header, &e);
        if (problem) {
            describe_entry_problem(o / RF__PACK_ENTRY_SIZE, &e, problem, c->why,
                                   c->why_len);
            return -1;
        }
    }
    return 0;
}

static int index_checksum_mismatch(char *why, size_t why_len)
{
    rf__format(why, why_len, "the checksum of its index does not match");
    return RF__FORMAT_DAMAGED;
}

/* Says why rf__copy_region() failed on the metadata at `offset`. */
static int copy_failed(int rc, uint64_t offset, uint64_t copied, char *why,
                       size_t why_len)
{
    if (rc == -ENODATA)
        rf__format(why, why_len,
                   "it ends at %llu bytes, inside its index: it was truncated "
                   "while it was opened",
                   (unsigned long long)offset + (unsigned long long)copied);
    else if (rc < 0)
        rf__format(why, why_len, "cannot copy its index: %s", strerror(-rc));
    /* RF__COPY_REFUSED: the check said why */
    return RF__FORMAT_DAMAGED;
}

/* A memfd of `size` bytes, all holes (no memory until written), or -1. */
static int metadata_memfd(uint64_t size, char *why, size_t why_len)
{
    const int fd = rf__fd_off_stdio(
        memfd_create("ringfeed-pack-index", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (fd >= 0 && ftruncate(fd, (off_t)size) == 0)
        return fd;
    rf__format(why, why_len, "cannot make a memfd for its index: %s",
               strerror(errno));
    if (fd >= 0)
        close(fd);
    return -1;
}

/* Index, names and dictionary are read once with pread() into a sealed
 * memfd and mapped from there, never mapped from the file itself: a file
 * truncated while it is open would turn every access to a mapping of it
 * past the new end into a SIGBUS. Sealed (no write, grow or shrink), the
 * memfd can be handed to producers (rf__dataset_index_fd()), which map
 * the same pages instead of a copy each. The copy is made and checked
 * (entries, meta_crc) a piece at a time, and leaves pages of zeros
 * unwritten: a damaged header whose index is a hole of gigabytes costs a
 * piece of memory and one piece's read. */
static int copy_metadata(rf_dataset *ds, uint64_t size, char *why,
                         size_t why_len)
{
    const struct rf__pack_header *h = &ds->header;
    struct piece_check pc = {h, why, why_len};
    const int fd = metadata_memfd(size, why, why_len);
    if (fd < 0)
        return RF__FORMAT_DAMAGED;
    const struct rf__copy copy = {.from = ds->fd,
                                  .offset = h->index_offset,
                                  .size = size,
                                  .to = fd,
                                  .crc32c = &ds->crc,
                                  .check = {check_piece_entries, &pc}};
    uint32_t crc = 0;
    uint64_t copied = 0;
    int rc = rf__copy_region(&copy, &crc, &copied);
    if (rc != 0)
        rc = copy_failed(rc, h->index_offset, copied, why, why_len);
    else if (crc != h->meta_crc)
        rc = index_checksum_mismatch(why, why_len);
    else if (fcntl(fd, F_ADD_SEALS, METADATA_SEALS | F_SEAL_SEAL) < 0) {
        rf__format(why, why_len, "cannot seal the copy of its index: %s",
                   strerror(errno));
        rc = RF__FORMAT_DAMAGED;
    }
    if (rc < 0)
        close(fd);
    else
        ds->meta_fd = fd;
    return rc;
}

/* A copy handed over by the consumer must be sealed (else it could shrink
 * under us) and as long as this file's metadata; meta_crc, checked next,
 * says whether it is this file's. */
static int adopt_metadata(rf_dataset *ds, int index_fd, uint64_t size,
                          char *why, size_t why_len)
{
    struct stat st;
    const int seals = fcntl(index_fd, F_GET_SEALS);
    if (seals < 0 || (seals & METADATA_SEALS) != METADATA_SEALS ||
        fstat(index_fd, &st) < 0 || (uint64_t)st.st_size != size) {
        rf__format(why, why_len,
                   "the copy of its index handed over (fd %d) is not a "
                   "sealed %llu-byte memfd",
                   index_fd, (unsigned long long)size);
        return RF__FORMAT_DAMAGED;
    }
    ds->meta_fd = fcntl(index_fd, F_DUPFD_CLOEXEC, 3);
    if (ds->meta_fd < 0) {
        rf__format(why, why_len, "cannot keep its index (fd %d): %s", index_fd,
                   strerror(errno));
        return RF__FORMAT_DAMAGED;
    }
    return 0;
}

/* Points entries, names and dictionary into the mapped metadata. */
static void use_metadata(rf_dataset *ds, const uint8_t *meta)
{
    const struct rf__pack_header *h = &ds->header;
    ds->entries = meta;
    ds->names = (const char *)meta + (h->names_offset - h->index_offset);
    ds->names_size = h->names_size;
    ds->dict = h->dict_size ? meta + (h->dict_offset - h->index_offset) : NULL;
}

static int map_metadata(rf_dataset *ds, uint64_t size, char *why,
                        size_t why_len)
{
    void *map = mmap(NULL, size, PROT_READ, MAP_SHARED, ds->meta_fd, 0);
    if (map == MAP_FAILED) {
        rf__format(why, why_len, "cannot map its index: %s", strerror(errno));
        return RF__FORMAT_DAMAGED;
    }
    ds->meta_map = map;
    ds->meta_map_size = (size_t)size;
    use_metadata(ds, map);
    return 0;
}

/* Gets index, names and dictionary (from the file, or from the consumer's
 * copy in index_fd), maps them and checks their checksum: a copy made here
 * was checked as it was read, one handed over is checked once mapped. */
static int load_pack_metadata(rf_dataset *ds, int index_fd, char *why,
                              size_t why_len)
{
    const struct rf__pack_header *h = &ds->header;
    const uint64_t size = h->file_size - h->index_offset;
    if (size == 0) /* no samples, names or dictionary: the CRC of nothing */
        return h->meta_crc == 0 ? 0 : index_checksum_mismatch(why, why_len);
    int rc = index_fd >= 0 ? adopt_metadata(ds, index_fd, size, why, why_len)
                           : copy_metadata(ds, size, why, why_len);
    if (rc == 0)
        rc = map_metadata(ds, size, why, why_len);
    if (rc == 0 && index_fd >= 0 &&
        rf__crc32c(&ds->crc, 0, ds->meta_map, size) != h->meta_crc)
        rc = index_checksum_mismatch(why, why_len);
    return rc;
}

static int read_pack_header(rf_dataset *ds, char *why, size_t why_len)
{
    uint8_t raw[RF__PACK_HEADER_SIZE];
    const ssize_t got = pread(ds->fd, raw, sizeof(raw), 0);
    if (got < 0) {
        rf__format(why, why_len, "cannot read it: %s", strerror(errno));
        return RF__FORMAT_DAMAGED;
    }
    if ((size_t)got < sizeof(raw)) {
        rf__format(why, why_len,
                   "not a ringfeed packed file: it has %zd bytes, fewer than "
                   "a header",
                   got);
        return RF__FORMAT_FOREIGN;
    }
    return rf__pack_header_decode(&ds->header, raw, why, why_len);
}

/* What the user can do about a file that is refused. */
static const char *pack_advice(int problem)
{
    switch (problem) {
    case RF__FORMAT_FOREIGN:
        return "; pass a folder of class folders or a file written by "
               "ringfeed-pack";
    case RF__FORMAT_NEWER:
        return ""; /* the reason says it: upgrade */
    default:
        return "; the file is damaged: copy it again, or write it again "
               "with ringfeed-pack";
    }
}

static int open_pack(rf_dataset *ds, uint64_t size, int index_fd, char *why,
                     size_t why_len)
{
    char reason[RF__DETAIL / 2];
    ds->kind = DATASET_PACK;
    int rc = read_pack_header(ds, reason, sizeof(reason));
    if (rc == 0)
        rc = check_pack_areas(&ds->header, size, reason, sizeof(reason));
    if (rc == 0) {
        ds->samples = ds->header.samples;
        ds->classes = ds->header.classes;
        rc = load_pack_metadata(ds, index_fd, reason, sizeof(reason));
    }
    if (rc == 0)
        rc = check_pack_entries(ds, reason, sizeof(reason));
    if (rc == 0)
        return 0;
    rf__format(why, why_len, "%s: %s%s", ds->path, reason, pack_advice(rc));
    return RF_E_CORRUPT_SAMPLE;
}

/* ---- opening ------------------------------------------------------------ */

static int open_path(rf_dataset *ds, int data_fd, int index_fd, char *why,
                     size_t why_len)
{
    struct stat st;
    /* A producer gets the consumer's open folder or file: by now the path
     * may name another dataset (a pack replaced by rename, a folder moved
     * and another put in its place) or none (a relative path after the
     * caller's chdir()). O_NONBLOCK: opening a FIFO by mistake must not
     * hang. */
    ds->fd = data_fd >= 0 ? fcntl(data_fd, F_DUPFD_CLOEXEC, 3)
                          : rf__fd_off_stdio(open(
                                ds->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (ds->fd < 0 || fstat(ds->fd, &st) < 0) {
        const int rc = -errno;
        rf__format(why, why_len,
                   "%s: %s; pass a folder of class folders or a packed file",
                   ds->path, strerror(errno));
        return rc;
    }
    if (S_ISDIR(st.st_mode))
        return open_folder(ds, index_fd, why, why_len);
    if (S_ISREG(st.st_mode))
        return open_pack(ds, (uint64_t)st.st_size, index_fd, why, why_len);
    rf__format(why, why_len,
               "%s is neither a folder nor a regular file; pass a folder of "
               "class folders or a packed file",
               ds->path);
    return -ENOTDIR;
}

int rf__dataset_open_indexed(rf_dataset **out, const char *path, int data_fd,
                             int index_fd, char *why, size_t why_len)
{
    *out = NULL;
    rf_dataset *ds = calloc(1, sizeof(*ds));
    if (ds)
        ds->path = strdup(path);
    if (!ds || !ds->path) {
        free(ds);
        rf__format(why, why_len, "%s: out of memory", path);
        return -ENOMEM;
    }
    ds->fd = -1;
    ds->meta_fd = -1;
    rf__crc32c_init(&ds->crc);
    const int rc = open_path(ds, data_fd, index_fd, why, why_len);
    if (rc < 0) {
        rf_dataset_close(ds);
        return rc;
    }
    *out = ds;
    return 0;
}

int rf_dataset_open(rf_dataset **out, const char *path, char **errp)
{
    char why[RF__DETAIL];
    const int rc =
        rf__dataset_open_indexed(out, path, -1, -1, why, sizeof(why));
    if (rc < 0 && errp)
        *errp = strdup(why);
    return rc;
}

void rf_dataset_close(rf_dataset *ds)
{
    if (!ds)
        return;
    if (ds->listing_mapped)
        munmap(ds->listing, ds->listing_size);
    else
        free(ds->listing);
    free(ds->walked.names);
    free(ds->walked.ids);
    if (ds->meta_map)
        munmap(ds->meta_map, ds->meta_map_size);
    if (ds->meta_fd >= 0)
        close(ds->meta_fd);
    if (ds->fd >= 0)
        close(ds->fd);
    free(ds->buffer);
    free(ds->path);
    free(ds);
}

uint64_t rf_dataset_size(const rf_dataset *ds)
{
    return ds->samples;
}

uint32_t rf_dataset_classes(const rf_dataset *ds)
{
    return ds->classes;
}

/* Sample i's label and stored name (NULL when it has none). */
static const char *entry_label_name(const rf_dataset *ds, uint64_t i,
                                    uint32_t *label, size_t *length)
{
    if (ds->kind == DATASET_FOLDER) {
        struct rf__index_entry e;
        rf__index_entry_decode(&e, ds->entries + i * RF__INDEX_ENTRY_SIZE);
        *label = e.label;
        *length = e.name_length;
        return ds->names + e.name_offset;
    }
    struct rf__pack_entry e;
    rf__pack_entry_decode(&e, ds->entries + i * RF__PACK_ENTRY_SIZE);
    *label = (uint32_t)e.label;
    *length = e.name_length;
    return e.name_length ? ds->names + e.name_offset : NULL;
}

int rf_dataset_class_name(const rf_dataset *ds, uint32_t label, char *out,
                          size_t len)
{
    if (!out || len == 0)
        return -EINVAL;
    out[0] = '\0';
    if (label >= ds->classes)
        return -ERANGE;
    for (uint64_t i = 0; i < ds->samples; i++) {
        uint32_t l;
        size_t length;
        const char *name = entry_label_name(ds, i, &l, &length);
        if (l != label || !name)
            continue;
        const char *slash = memchr(name, '/', length);
        const size_t n = slash ? (size_t)(slash - name) : length;
        rf__format(out, len, "%.*s", (int)n, name);
        return 0;
    }
    return -ENOENT;
}

const char *rf_dataset_error(const rf_dataset *ds)
{
    return ds->error;
}

char *rf__dataset_error_buffer(rf_dataset *ds, size_t *len)
{
    *len = sizeof(ds->error);
    return ds->error;
}

const void *rf__dataset_dict(const rf_dataset *ds, size_t *size)
{
    const bool has = ds->kind == DATASET_PACK && ds->header.dict_size > 0;
    *size = has ? (size_t)ds->header.dict_size : 0;
    return has ? ds->dict : NULL;
}

void rf__dataset_raw_shape(const rf_dataset *ds, uint32_t *height,
                           uint32_t *width, uint32_t *channels,
                           rf_layout *layout)
{
    /* a folder's header is all zeros (calloc) */
    *height = ds->header.height;
    *width = ds->header.width;
    *channels = ds->header.channels;
    *layout = (rf_layout)ds->header.layout;
}

/* ---- the listing for producers ------------------------------------------ */

const struct rf__walked *rf__dataset_walked(const rf_dataset *ds)
{
    return ds->walked.names ? &ds->walked : NULL;
}

int rf__dataset_index_write(const rf_dataset *ds, int fd, char *why,
                            size_t why_len)
{
    if (ds->kind != DATASET_FOLDER) {
        rf__format(why, why_len, "%s: a packed file has no folder listing",
                   ds->path);
        return -EINVAL;
    }
    const int rc = rf__pwrite_all(fd, ds->listing, ds->listing_size, 0);
    if (rc < 0)
        rf__format(why, why_len, "%s: cannot write its listing: %s", ds->path,
                   strerror(-rc));
    return rc;
}

/* The memfd is sealed once written: a producer that maps it can trust
 * that it never changes size (no SIGBUS) nor content. */
/* A packed file's copy of its metadata, for producers. */
static int pack_index_fd(rf_dataset *ds, int *fd)
{
    if (ds->meta_fd < 0)
        return 0; /* nothing to share */
    *fd = fcntl(ds->meta_fd, F_DUPFD_CLOEXEC, 3);
    if (*fd >= 0)
        return 0;
    const int rc = -errno;
    rf__format(ds->error, sizeof(ds->error),
               "%s: cannot hand over the copy of its index: %s", ds->path,
               strerror(errno));
    return rc;
}

int rf__dataset_data_fd(const rf_dataset *ds)
{
    const int fd = fcntl(ds->fd, F_DUPFD_CLOEXEC, 3);
    return fd >= 0 ? fd : -errno;
}

int rf__dataset_index_fd(rf_dataset *ds, int *fd)
{
    *fd = -1;
    if (ds->kind != DATASET_FOLDER)
        return pack_index_fd(ds, fd);
    const int mfd = rf__fd_off_stdio(
        memfd_create("ringfeed-listing", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (mfd < 0) {
        const int rc = -errno;
        rf__format(ds->error, sizeof(ds->error),
                   "%s: cannot create a memfd for its listing: %s", ds->path,
                   strerror(errno));
        return rc;
    }
    int rc = rf__dataset_index_write(ds, mfd, ds->error, sizeof(ds->error));
    if (rc == 0 &&
        fcntl(mfd, F_ADD_SEALS,
              F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
        rc = -errno;
        rf__format(ds->error, sizeof(ds->error),
                   "%s: cannot seal the memfd of its listing: %s", ds->path,
                   strerror(errno));
    }
    if (rc < 0) {
        close(mfd);
        return rc;
    }
    *fd = mfd;
    return 0;
}

/* ---- reading samples ---------------------------------------------------- */

/* A read buffer above this size is given back at the next smaller read:
 * one odd file (a JPEG with 300 MB of zeros appended decodes fine) must
 * not pin its size in every producer for the rest of a week-long run. */
#define KEEP_BUFFER_BYTES (16u << 20)

static int reserve_buffer(rf_dataset *ds, size_t size)
{
    const bool fits = size <= ds->buffer_size && ds->buffer;
    const bool oversized =
        ds->buffer_size > KEEP_BUFFER_BYTES && size <= KEEP_BUFFER_BYTES;
    if (fits && !oversized)
        return 0;
    /* round up so that slowly growing samples do not realloc each time */
    const size_t want = (size | 0xffff) + 1;
    uint8_t *buffer = realloc(ds->buffer, want);
    if (!buffer)
        return fits ? 0 : -ENOMEM; /* a failed shrink keeps what it has */
    ds->buffer = buffer;
    ds->buffer_size = want;
    return 0;
}

/* "sample 12 (/data/train/cls/a.jpg)", as every message names it. */
static void describe_folder_sample(const rf_dataset *ds, uint64_t index,
                                   const char *name, char *out, size_t len)
{
    char whole[2 * RF__PATH_MAX + 64];
    rf__format(whole, sizeof(whole), "sample %llu (%s/%s)",
               (unsigned long long)index, ds->path, name);
    rf__copy_elided(out, len, whole);
}

/* "sample 12 (cls/a.jpg, packed offset 128) of /data/x.pack", or without
 * the name when the pack stores none. */
static void describe_packed_sample(const rf_dataset *ds, uint64_t index,
                                   const struct rf__pack_entry *e, char *out,
                                   size_t len)
{
    const char *name = e->name_length ? ds->names + e->name_offset : NULL;
    char whole[2 * RF__PATH_MAX + 64];
    rf__format(whole, sizeof(whole),
               "sample %llu (%s%spacked offset %llu) of %s",
               (unsigned long long)index, name ? name : "", name ? ", " : "",
               (unsigned long long)e->offset, ds->path);
    rf__copy_elided(out, len, whole);
}

void rf__dataset_describe(const rf_dataset *ds, uint64_t index, char *out,
                          size_t len)
{
    if (index >= ds->samples) {
        char whole[RF__PATH_MAX + 64];
        rf__format(whole, sizeof(whole), "sample %llu of %s",
                   (unsigned long long)index, ds->path);
        rf__copy_elided(out, len, whole);
    } else if (ds->kind == DATASET_FOLDER) {
        struct rf__index_entry e;
        rf__index_entry_decode(&e, ds->entries + index * RF__INDEX_ENTRY_SIZE);
        describe_folder_sample(ds, index, ds->names + e.name_offset, out, len);
    } else {
        struct rf__pack_entry e;
        rf__pack_entry_decode(&e, ds->entries + index * RF__PACK_ENTRY_SIZE);
        describe_packed_sample(ds, index, &e, out, len);
    }
}

/* The error of a sample that cannot be read: who, what, and errno's text
 * for a negative errno. */
static int sample_failed(rf_dataset *ds, const char *who, const char *what,
                         int rc)
{
    rf__format(ds->error, sizeof(ds->error), "%s: %s%s%s", who, what,
               rc < 0 && rc > -4096 ? ": " : "",
               rc < 0 && rc > -4096 ? strerror(-rc) : "");
    return rc;
}

static int folder_sample_failed(rf_dataset *ds, uint64_t index,
                                const char *name, const char *what, int rc)
{
    char who[RF__SAMPLE_NAME_MAX];
    describe_folder_sample(ds, index, name, who, sizeof(who));
    return sample_failed(ds, who, what, rc);
}

/* Opens and checks the file of a folder sample; returns its fd and size. */
static int open_folder_sample(rf_dataset *ds, uint64_t index, const char *name,
                              size_t *size)
{
    struct stat st;
    const int fd = rf__fd_off_stdio(
        openat(ds->fd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
    if (fd < 0)
        return folder_sample_failed(ds, index, name, "cannot open it", -errno);
    int rc = 0;
    if (fstat(fd, &st) < 0)
        rc = folder_sample_failed(ds, index, name, "cannot stat it", -errno);
    else if (!S_ISREG(st.st_mode))
        rc = folder_sample_failed(ds, index, name,
                                  "is not a regular file; remove it",
                                  RF_E_CORRUPT_SAMPLE);
    else if ((uint64_t)st.st_size > RF__SAMPLE_MAX)
        rc = folder_sample_failed(ds, index, name,
                                  "is larger than " RF__SAMPLE_MAX_TEXT
                                  ", more than a sample may have (in a "
                                  "folder as in a pack); remove it",
                                  RF_E_CORRUPT_SAMPLE);
    if (rc < 0) {
        close(fd);
        return rc;
    }
    *size = (size_t)st.st_size;
    return fd;
}

static int read_folder_sample(rf_dataset *ds, uint64_t index,
                              rf_sample_info *info)
{
    struct rf__index_entry e;
    size_t size = 0;
    rf__index_entry_decode(&e, ds->entries + index * RF__INDEX_ENTRY_SIZE);
    const char *name = ds->names + e.name_offset;
    const int fd = open_folder_sample(ds, index, name, &size);
    if (fd < 0)
        return fd;
    ssize_t got = reserve_buffer(ds, size);
    if (got == 0)
        got = rf__pread_all(fd, ds->buffer, size, 0);
    close(fd);
    if (got < 0)
        return folder_sample_failed(ds, index, name, "cannot read it",
                                    (int)got);
    if ((size_t)got < size)
        return folder_sample_failed(ds, index, name,
                                    "it became shorter while it was read",
                                    RF_E_CORRUPT_SAMPLE);
    *info = (rf_sample_info){.data = ds->buffer,
                             .size = size,
                             .label = e.label,
                             .kind = RF_SAMPLE_JPEG,
                             .name = name};
    return 0;
}

/* The name of a packed sample: its stored name, else "packed offset N". */
static const char *packed_name(rf_dataset *ds, const struct rf__pack_entry *e)
{
    if (e->name_length)
        return ds->names + e->name_offset;
    rf__format(ds->name, sizeof(ds->name), "packed offset %llu",
               (unsigned long long)e->offset);
    return ds->name;
}

static int packed_sample_failed(rf_dataset *ds, uint64_t index,
                                const struct rf__pack_entry *e,
                                const char *what, int rc)
{
    char who[RF__SAMPLE_NAME_MAX];
    describe_packed_sample(ds, index, e, who, sizeof(who));
    return sample_failed(ds, who, what, rc);
}

static int read_packed_sample(rf_dataset *ds, uint64_t index,
                              rf_sample_info *info)
{
    struct rf__pack_entry e;
    rf__pack_entry_decode(&e, ds->entries + index * RF__PACK_ENTRY_SIZE);
    ssize_t got = reserve_buffer(ds, e.size);
    if (got == 0)
        got = rf__pread_all(ds->fd, ds->buffer, e.size, e.offset);
    if (got < 0)
        return packed_sample_failed(ds, index, &e, "cannot read it", (int)got);
    if ((size_t)got < e.size)
        return packed_sample_failed(ds, index, &e,
                                    "the file was truncated after it was "
                                    "opened; copy it again",
                                    RF_E_CORRUPT_SAMPLE);
    const uint32_t crc = rf__crc32c(&ds->crc, 0, ds->buffer, e.size);
    if (crc != e.crc) {
        char what[160];
        rf__format(what, sizeof(what),
                   "payload checksum mismatch (stored %08x, computed %08x); "
                   "the file is damaged: copy or write it again",
                   e.crc, crc);
        return packed_sample_failed(ds, index, &e, what, RF_E_CORRUPT_SAMPLE);
    }
    *info = (rf_sample_info){.data = ds->buffer,
                             .size = e.size,
                             .label = e.label,
                             .kind = (rf_sample_kind)e.kind,
                             .name = packed_name(ds, &e)};
    return 0;
}

int rf_dataset_read(rf_dataset *ds, uint64_t index, rf_sample_info *info)
{
    if (index >= ds->samples) {
        rf__format(ds->error, sizeof(ds->error),
                   "sample %llu of %s: out of range; it has %llu samples",
                   (unsigned long long)index, ds->path,
                   (unsigned long long)ds->samples);
        return -ERANGE;
    }
    const int rc = ds->kind == DATASET_FOLDER
                       ? read_folder_sample(ds, index, info)
                       : read_packed_sample(ds, index, info);
    if (rc == 0)
        ds->error[0] = '\0';
    return rc;
}
