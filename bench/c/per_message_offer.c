/*
 * The fair benchmark's publisher loop for OUR archive over IPC: one offer per message, as a
 * user's application (and the Java 1.15.1 bench client, ArchiveBenchClient.record) does.
 *
 * It is C because a Python loop makes only ~1-3 M offers/s and would measure Python, not the
 * archive. The algorithm is the Java client's line for line: the payload is pre-filled with
 * byte j = j * 7, only its first 8 bytes (the message index, little-endian) change per message;
 * an offer refused with a retryable result counts as back-pressured and is retried after
 * sched_yield() (Java's Thread.yield()), so on 2 cores the publisher leaves the CPU to the
 * archive it waits for. The time from a first refusal to the offer that gets in is summed too
 * (two clock reads per refused streak, none on the accepted path): how long the archive held the
 * publisher back.
 *
 * No Aeron header is included: the caller passes aeron_exclusive_publication_offer's address,
 * taken from the pyaeron library the process already loaded, so this file needs only a C
 * compiler (bench/per_message_publisher.py builds it into the benchmark's cache).
 */
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

typedef int64_t (*offer_function_t)(void *publication, const uint8_t *buffer, size_t length,
                                    void *reserved_value_supplier, void *clientd);

/* Aeron's offer results (aeronc.h); the first three are retryable. */
#define NOT_CONNECTED (-1)
#define BACK_PRESSURED (-2)
#define ADMIN_ACTION (-3)

/* Returned when the publisher stayed back-pressured past the deadline. */
#define PUBLISH_TIMED_OUT (-100)

static int64_t monotonic_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000000000LL + now.tv_nsec;
}

static void put_index_le(uint8_t *payload, int64_t index)
{
    uint64_t value = (uint64_t)index;
    for (int i = 0; i < 8; i++)
    {
        payload[i] = (uint8_t)(value >> (8 * i));
    }
}

/*
 * Offers messages first_index .. first_index + count - 1 of `size` bytes from `payload` (the
 * caller's buffer, pre-filled). Returns 0 when all were offered, the offer's fatal result
 * (CLOSED, MAX_POSITION_EXCEEDED, ERROR) or PUBLISH_TIMED_OUT; `*offered` says how many got in
 * and `*back_pressured` counts the refused offers, `*back_pressured_ns` the time spent retrying them.
 */
int64_t offer_messages(offer_function_t offer, void *publication, uint8_t *payload, size_t size,
                       int64_t first_index, int64_t count, int64_t deadline_ns,
                       int64_t *offered, int64_t *back_pressured, int64_t *back_pressured_ns)
{
    int64_t refused = 0;
    int64_t refused_ns = 0;
    int64_t streak_began_ns = 0;
    int64_t index = first_index;
    const int64_t end = first_index + count;
    int64_t status = 0;
    for (; index < end; index++)
    {
        if (size >= 8)
        {
            put_index_le(payload, index);
        }
        int64_t result;
        while ((result = offer(publication, payload, size, NULL, NULL)) < 0)
        {
            if (result != NOT_CONNECTED && result != BACK_PRESSURED && result != ADMIN_ACTION)
            {
                status = result;
                goto done;
            }
            if (streak_began_ns == 0)
            {
                streak_began_ns = monotonic_ns();
            }
            refused++;
            if ((refused & 0xFFFF) == 0 && monotonic_ns() > deadline_ns)
            {
                status = PUBLISH_TIMED_OUT;
                goto done;
            }
            sched_yield();
        }
        if (streak_began_ns != 0)
        {
            refused_ns += monotonic_ns() - streak_began_ns;
            streak_began_ns = 0;
        }
    }
done:
    if (streak_began_ns != 0)
    {
        refused_ns += monotonic_ns() - streak_began_ns;
    }
    *offered = index - first_index;
    *back_pressured = refused;
    *back_pressured_ns = refused_ns;
    return status;
}
