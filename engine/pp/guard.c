/* guard.c - where a generator's own code runs (ppv_generator_site).
 *
 * Every call into a generator's table is marked on the calling thread, so
 * that a process guarding its plug-ins can name the one that ends the
 * process, dies of a signal or never returns. A thread's mark is one
 * pointer in a slot of a fixed table that a watchdog thread may scan; the
 * slot is claimed on the thread's first mark and freed when the thread
 * ends. Marking costs two relaxed atomic stores: the slot holds no clock,
 * the watchdog keeps time itself from the count of entries.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "pp_internal.h"

enum { SLOTS = 256 };

typedef struct site_slot {
    atomic_int used;
    _Atomic(const ppv_generator_site *) site;
    atomic_uint_fast64_t entries;
} site_slot;

static site_slot slots[SLOTS];
/* a thread past the table's size is marked here: its exits and signals
 * are still named, only the watchdog cannot see it */
static _Thread_local site_slot unlisted;
static _Thread_local site_slot *mine;
static pthread_key_t release_key;
static pthread_once_t release_once = PTHREAD_ONCE_INIT;

static void release(void *slot) {
    site_slot *s = slot;
    atomic_store_explicit(&s->site, NULL, memory_order_relaxed);
    atomic_store_explicit(&s->used, 0, memory_order_release);
}

static void make_key(void) {
    if (pthread_key_create(&release_key, release) != 0) release_key = (pthread_key_t)-1;
}

/* This thread's slot, claimed on first use. */
static site_slot *claim(void) {
    pthread_once(&release_once, make_key);
    for (int i = 0; i < SLOTS; i++) {
        int expected = 0;
        if (atomic_compare_exchange_strong(&slots[i].used, &expected, 1)) {
            if (release_key != (pthread_key_t)-1 && pthread_setspecific(release_key, &slots[i]) == 0)
                return mine = &slots[i];
            atomic_store(&slots[i].used, 0); /* never freed: not listed */
            break;
        }
    }
    return mine = &unlisted;
}

const ppv_generator_site *pp_site_set(const ppv_generator_site *s) {
    site_slot *slot = mine ? mine : claim();
    const ppv_generator_site *was = atomic_load_explicit(&slot->site, memory_order_relaxed);
    if (s) /* only this thread writes its count: no locked add */
        atomic_store_explicit(&slot->entries,
                              atomic_load_explicit(&slot->entries, memory_order_relaxed) + 1,
                              memory_order_relaxed);
    atomic_store_explicit(&slot->site, s, memory_order_release);
    return was;
}

const ppv_generator_site *ppv_generator_site_now(void) {
    site_slot *slot = mine;
    return slot ? atomic_load_explicit(&slot->site, memory_order_acquire) : NULL;
}

int ppv_generator_sites_visit(void (*fn)(void *ctx, int slot, const ppv_generator_site *s,
                                         uint64_t entries),
                              void *ctx) {
    int n = 0;
    for (int i = 0; i < SLOTS; i++) {
        if (!atomic_load_explicit(&slots[i].used, memory_order_acquire)) continue;
        uint64_t entries = atomic_load_explicit(&slots[i].entries, memory_order_relaxed);
        const ppv_generator_site *s = atomic_load_explicit(&slots[i].site, memory_order_acquire);
        if (!s) continue;
        fn(ctx, i, s, entries);
        n++;
    }
    return n;
}
