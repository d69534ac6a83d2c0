"""cffi ABI-mode binding of the Aeron 1.53 C API (client ``aeronc.h`` + driver ``aeronmd.h``).

pyaeron's extension module links the whole Aeron C client and C media driver and exports every
``aeron_*`` symbol, but its Python objects expose no C pointers. We ``dlopen`` that same shared
object and declare, by hand, only the functions and structs this package calls. A declaration
that disagrees with the real C signature or struct layout corrupts memory, so:

* every struct below repeats the header's ``#pragma pack(4)`` where the header has it
  (``pack=4`` in ``cdef``), and ``tests/unit/driver_integration/test_capi.py`` pins each size/offset;
* every declared function is called by at least one test
  (``tests/integration/driver/test_capi_coverage.py`` proves it).

cffi releases the GIL around each C call; callbacks re-acquire it.
"""

from __future__ import annotations

import atexit
import os
import re

import cffi

# Structs declared with #pragma pack(4) in aeronc.h.
_PACKED_CDEF = """
typedef struct aeron_header_values_frame_stct {
    int32_t frame_length;
    int8_t version;
    uint8_t flags;
    int16_t type;
    int32_t term_offset;
    int32_t session_id;
    int32_t stream_id;
    int32_t term_id;
    int64_t reserved_value;
} aeron_header_values_frame_t;

typedef struct aeron_header_values_stct {
    aeron_header_values_frame_t frame;
    int32_t initial_term_id;
    size_t position_bits_to_shift;
} aeron_header_values_t;
"""

_CDEF = """
typedef struct aeron_context_stct aeron_context_t;
typedef struct aeron_stct aeron_t;
typedef struct aeron_publication_stct aeron_publication_t;
typedef struct aeron_exclusive_publication_stct aeron_exclusive_publication_t;
typedef struct aeron_header_stct aeron_header_t;
typedef struct aeron_subscription_stct aeron_subscription_t;
typedef struct aeron_image_stct aeron_image_t;
typedef struct aeron_counter_stct aeron_counter_t;
typedef struct aeron_counters_reader_stct aeron_counters_reader_t;
typedef struct aeron_client_registering_resource_stct aeron_async_add_publication_t;
typedef struct aeron_client_registering_resource_stct aeron_async_add_exclusive_publication_t;
typedef struct aeron_client_registering_resource_stct aeron_async_add_subscription_t;
typedef struct aeron_client_registering_resource_stct aeron_async_add_counter_t;
typedef struct aeron_client_registering_resource_stct aeron_async_destination_t;
typedef struct aeron_image_fragment_assembler_stct aeron_image_fragment_assembler_t;
typedef struct aeron_fragment_assembler_stct aeron_fragment_assembler_t;
typedef struct aeron_driver_context_stct aeron_driver_context_t;
typedef struct aeron_driver_stct aeron_driver_t;

typedef void (*aeron_notification_t)(void *clientd);
typedef void (*aeron_error_handler_t)(void *clientd, int errcode, const char *message);
typedef void (*aeron_on_available_image_t)(void *clientd, aeron_subscription_t *subscription,
                                           aeron_image_t *image);
typedef void (*aeron_on_unavailable_image_t)(void *clientd, aeron_subscription_t *subscription,
                                             aeron_image_t *image);
typedef int64_t (*aeron_reserved_value_supplier_t)(void *clientd, uint8_t *buffer, size_t frame_length);
typedef void (*aeron_fragment_handler_t)(void *clientd, const uint8_t *buffer, size_t length,
                                         aeron_header_t *header);
typedef void (*aeron_block_handler_t)(void *clientd, const uint8_t *buffer, size_t length,
                                      int32_t session_id, int32_t term_id);
typedef void (*aeron_log_func_t)(const char *);

typedef struct aeron_buffer_claim_stct {
    uint8_t *frame_header;
    uint8_t *data;
    size_t length;
} aeron_buffer_claim_t;

typedef struct aeron_publication_constants_stct {
    const char *channel;
    int64_t original_registration_id;
    int64_t registration_id;
    int64_t max_possible_position;
    size_t position_bits_to_shift;
    size_t term_buffer_length;
    size_t max_message_length;
    size_t max_payload_length;
    int32_t stream_id;
    int32_t session_id;
    int32_t initial_term_id;
    int32_t publication_limit_counter_id;
    int32_t channel_status_indicator_id;
} aeron_publication_constants_t;

typedef struct aeron_subscription_constants_stct {
    const char *channel;
    aeron_on_available_image_t on_available_image;
    aeron_on_unavailable_image_t on_unavailable_image;
    int64_t registration_id;
    int32_t stream_id;
    int32_t channel_status_indicator_id;
} aeron_subscription_constants_t;

typedef struct aeron_image_constants_stct {
    aeron_subscription_t *subscription;
    const char *source_identity;
    int64_t correlation_id;
    int64_t join_position;
    size_t position_bits_to_shift;
    size_t term_buffer_length;
    size_t mtu_length;
    int32_t session_id;
    int32_t initial_term_id;
    int32_t subscriber_position_id;
} aeron_image_constants_t;

typedef struct aeron_counter_constants_stct {
    int64_t correlation_id;
    int64_t registration_id;
    int32_t counter_id;
} aeron_counter_constants_t;

typedef enum aeron_threading_mode_enum {
    AERON_THREADING_MODE_DEDICATED,
    AERON_THREADING_MODE_SHARED_NETWORK,
    AERON_THREADING_MODE_SHARED,
    AERON_THREADING_MODE_INVOKER
} aeron_threading_mode_t;

/* errors, version */
int aeron_errcode(void);
const char *aeron_errmsg(void);
const char *aeron_version_full(void);

/* client context and client */
int aeron_context_init(aeron_context_t **context);
int aeron_context_close(aeron_context_t *context);
int aeron_context_set_dir(aeron_context_t *context, const char *value);
int aeron_context_set_driver_timeout_ms(aeron_context_t *context, uint64_t value);
int aeron_context_set_client_name(aeron_context_t *context, const char *value);
int aeron_context_set_error_handler(aeron_context_t *context, aeron_error_handler_t handler, void *clientd);
int aeron_init(aeron_t **client, aeron_context_t *context);
int aeron_start(aeron_t *client);
int aeron_close(aeron_t *client);
int64_t aeron_client_id(aeron_t *client);
int64_t aeron_next_correlation_id(aeron_t *client);
aeron_counters_reader_t *aeron_counters_reader(aeron_t *client);

/* async adds */
int aeron_async_add_publication(aeron_async_add_publication_t **async, aeron_t *client,
                                const char *uri, int32_t stream_id);
int aeron_async_add_publication_poll(aeron_publication_t **publication,
                                     aeron_async_add_publication_t *async);
int aeron_async_add_exclusive_publication(aeron_async_add_exclusive_publication_t **async,
                                          aeron_t *client, const char *uri, int32_t stream_id);
int aeron_async_add_exclusive_publication_poll(aeron_exclusive_publication_t **publication,
                                               aeron_async_add_exclusive_publication_t *async);
int aeron_async_add_subscription(aeron_async_add_subscription_t **async, aeron_t *client,
                                 const char *uri, int32_t stream_id,
                                 aeron_on_available_image_t on_available_image_handler,
                                 void *on_available_image_clientd,
                                 aeron_on_unavailable_image_t on_unavailable_image_handler,
                                 void *on_unavailable_image_clientd);
int aeron_async_add_subscription_poll(aeron_subscription_t **subscription,
                                      aeron_async_add_subscription_t *async);
int64_t aeron_async_add_subscription_get_registration_id(aeron_async_add_subscription_t *add_subscription);
int aeron_async_add_counter(aeron_async_add_counter_t **async, aeron_t *client, int32_t type_id,
                            const uint8_t *key_buffer, size_t key_buffer_length,
                            const char *label_buffer, size_t label_buffer_length);
int aeron_async_add_counter_poll(aeron_counter_t **counter, aeron_async_add_counter_t *async);

/* concurrent publication */
int64_t aeron_publication_offer(aeron_publication_t *publication, const uint8_t *buffer, size_t length,
                                aeron_reserved_value_supplier_t reserved_value_supplier, void *clientd);
int64_t aeron_publication_try_claim(aeron_publication_t *publication, size_t length,
                                    aeron_buffer_claim_t *buffer_claim);
bool aeron_publication_is_closed(aeron_publication_t *publication);
bool aeron_publication_is_connected(aeron_publication_t *publication);
int aeron_publication_constants(aeron_publication_t *publication, aeron_publication_constants_t *constants);
int64_t aeron_publication_position(aeron_publication_t *publication);
int aeron_publication_close(aeron_publication_t *publication, aeron_notification_t on_close_complete,
                            void *on_close_complete_clientd);

/* exclusive publication */
int64_t aeron_exclusive_publication_offer(aeron_exclusive_publication_t *publication,
                                          const uint8_t *buffer, size_t length,
                                          aeron_reserved_value_supplier_t reserved_value_supplier,
                                          void *clientd);
int64_t aeron_exclusive_publication_try_claim(aeron_exclusive_publication_t *publication, size_t length,
                                              aeron_buffer_claim_t *buffer_claim);
int64_t aeron_exclusive_publication_append_padding(aeron_exclusive_publication_t *publication,
                                                   size_t length);
int64_t aeron_exclusive_publication_offer_block(aeron_exclusive_publication_t *publication,
                                                const uint8_t *buffer, size_t length);
int aeron_exclusive_publication_constants(aeron_exclusive_publication_t *publication,
                                          aeron_publication_constants_t *constants);
int64_t aeron_exclusive_publication_position(aeron_exclusive_publication_t *publication);
int aeron_exclusive_publication_close(aeron_exclusive_publication_t *publication,
                                      aeron_notification_t on_close_complete,
                                      void *on_close_complete_clientd);
bool aeron_exclusive_publication_is_closed(aeron_exclusive_publication_t *publication);
bool aeron_exclusive_publication_is_connected(aeron_exclusive_publication_t *publication);

int aeron_buffer_claim_commit(aeron_buffer_claim_t *buffer_claim);
int aeron_buffer_claim_abort(aeron_buffer_claim_t *buffer_claim);

/* fragment headers */
int aeron_header_values(aeron_header_t *header, aeron_header_values_t *values);
int64_t aeron_header_position(aeron_header_t *header);
void *aeron_header_context(aeron_header_t *header);

/* subscription */
int aeron_subscription_poll(aeron_subscription_t *subscription, aeron_fragment_handler_t handler,
                            void *clientd, size_t fragment_limit);
bool aeron_subscription_is_connected(aeron_subscription_t *subscription);
int aeron_subscription_constants(aeron_subscription_t *subscription,
                                 aeron_subscription_constants_t *constants);
int aeron_subscription_image_count(aeron_subscription_t *subscription);
aeron_image_t *aeron_subscription_image_by_session_id(aeron_subscription_t *subscription,
                                                      int32_t session_id);
aeron_image_t *aeron_subscription_image_at_index(aeron_subscription_t *subscription, size_t index);
int aeron_subscription_image_retain(aeron_subscription_t *subscription, aeron_image_t *image);
int aeron_image_release(aeron_image_t *image);
bool aeron_subscription_is_closed(aeron_subscription_t *subscription);
int aeron_subscription_close(aeron_subscription_t *subscription, aeron_notification_t on_close_complete,
                             void *on_close_complete_clientd);
int aeron_subscription_try_resolve_channel_endpoint_port(aeron_subscription_t *subscription, char *uri,
                                                         size_t uri_len);
int aeron_subscription_resolved_endpoint(aeron_subscription_t *subscription, const char *address,
                                         size_t address_len);

/* multi-destination subscription (control-mode=manual): destinations added and removed by hand */
int aeron_subscription_async_add_destination(aeron_async_destination_t **async, aeron_t *client,
                                             aeron_subscription_t *subscription, const char *uri);
int aeron_subscription_async_remove_destination(aeron_async_destination_t **async, aeron_t *client,
                                                aeron_subscription_t *subscription, const char *uri);
int aeron_subscription_async_destination_poll(aeron_async_destination_t *async);

/* image */
int aeron_image_constants(aeron_image_t *image, aeron_image_constants_t *constants);
int64_t aeron_image_position(aeron_image_t *image);
bool aeron_image_is_end_of_stream(aeron_image_t *image);
int64_t aeron_image_end_of_stream_position(aeron_image_t *image);
int aeron_image_poll(aeron_image_t *image, aeron_fragment_handler_t handler, void *clientd,
                     size_t fragment_limit);
int aeron_image_block_poll(aeron_image_t *image, aeron_block_handler_t handler, void *clientd,
                           size_t block_length_limit);
bool aeron_image_is_closed(aeron_image_t *image);
int aeron_image_active_transport_count(aeron_image_t *image);

/* fragment assemblers (reassemble BEGIN..END fragments into whole messages, in C) */
int aeron_image_fragment_assembler_create(aeron_image_fragment_assembler_t **assembler,
                                          aeron_fragment_handler_t delegate, void *delegate_clientd);
int aeron_image_fragment_assembler_delete(aeron_image_fragment_assembler_t *assembler);
void aeron_image_fragment_assembler_handler(void *clientd, const uint8_t *buffer, size_t length,
                                            aeron_header_t *header);
int aeron_fragment_assembler_create(aeron_fragment_assembler_t **assembler,
                                    aeron_fragment_handler_t delegate, void *delegate_clientd);
int aeron_fragment_assembler_delete(aeron_fragment_assembler_t *assembler);
void aeron_fragment_assembler_handler(void *clientd, const uint8_t *buffer, size_t length,
                                      aeron_header_t *header);

/* counters */
int64_t *aeron_counter_addr(aeron_counter_t *counter);
int aeron_counter_constants(aeron_counter_t *counter, aeron_counter_constants_t *constants);
int aeron_counter_close(aeron_counter_t *counter, aeron_notification_t on_close_complete,
                        void *on_close_complete_clientd);
bool aeron_counter_is_closed(aeron_counter_t *counter);
int32_t aeron_counters_reader_max_counter_id(aeron_counters_reader_t *reader);
int64_t *aeron_counters_reader_addr(aeron_counters_reader_t *counters_reader, int32_t counter_id);
int aeron_counters_reader_counter_registration_id(aeron_counters_reader_t *counters_reader,
                                                  int32_t counter_id, int64_t *registration_id);
int aeron_counters_reader_counter_state(aeron_counters_reader_t *counters_reader, int32_t counter_id,
                                        int32_t *state);
int aeron_counters_reader_counter_type_id(aeron_counters_reader_t *counters_reader, int32_t counter_id,
                                          int32_t *type_id);
int aeron_counters_reader_metadata_key(aeron_counters_reader_t *counters_reader, int32_t counter_id,
                                       uint8_t **key_p);
int aeron_counters_reader_counter_label(aeron_counters_reader_t *counters_reader, int32_t counter_id,
                                        char *buffer, size_t buffer_length);
typedef struct aeron_counters_reader_buffers_stct {
    uint8_t *values;
    uint8_t *metadata;
    size_t values_length;
    size_t metadata_length;
} aeron_counters_reader_buffers_t;
int aeron_counters_reader_get_buffers(aeron_counters_reader_t *reader, aeron_counters_reader_buffers_t *buffers);

/* embedded media driver (aeronmd.h) */
int aeron_driver_context_init(aeron_driver_context_t **context);
int aeron_driver_context_close(aeron_driver_context_t *context);
int aeron_driver_context_set_dir(aeron_driver_context_t *context, const char *value);
int aeron_driver_context_set_threading_mode(aeron_driver_context_t *context, aeron_threading_mode_t mode);
int aeron_driver_context_set_dir_delete_on_start(aeron_driver_context_t *context, bool value);
int aeron_driver_context_set_dir_delete_on_shutdown(aeron_driver_context_t *context, bool value);
int aeron_driver_context_set_conductor_idle_strategy(aeron_driver_context_t *context, const char *value);
int aeron_driver_context_set_conductor_idle_strategy_init_args(aeron_driver_context_t *context, const char *value);
int aeron_driver_context_set_sender_idle_strategy(aeron_driver_context_t *context, const char *value);
int aeron_driver_context_set_sender_idle_strategy_init_args(aeron_driver_context_t *context, const char *value);
int aeron_driver_context_set_receiver_idle_strategy(aeron_driver_context_t *context, const char *value);
int aeron_driver_context_set_receiver_idle_strategy_init_args(aeron_driver_context_t *context, const char *value);
int aeron_driver_context_set_sharednetwork_idle_strategy(aeron_driver_context_t *context, const char *value);
int aeron_driver_context_set_sharednetwork_idle_strategy_init_args(aeron_driver_context_t *context, const char *value);
int aeron_driver_context_set_shared_idle_strategy(aeron_driver_context_t *context, const char *value);
int aeron_driver_context_set_shared_idle_strategy_init_args(aeron_driver_context_t *context, const char *value);
const char *aeron_driver_context_get_conductor_idle_strategy_init_args(aeron_driver_context_t *context);
const char *aeron_driver_context_get_sender_idle_strategy_init_args(aeron_driver_context_t *context);
const char *aeron_driver_context_get_receiver_idle_strategy_init_args(aeron_driver_context_t *context);
const char *aeron_driver_context_get_sharednetwork_idle_strategy_init_args(aeron_driver_context_t *context);
const char *aeron_driver_context_get_shared_idle_strategy_init_args(aeron_driver_context_t *context);
int aeron_driver_context_set_client_liveness_timeout_ns(aeron_driver_context_t *context, uint64_t value);
int aeron_driver_context_set_term_buffer_length(aeron_driver_context_t *context, size_t value);
int aeron_driver_context_set_ipc_term_buffer_length(aeron_driver_context_t *context, size_t value);
int aeron_driver_context_set_term_buffer_sparse_file(aeron_driver_context_t *context, bool value);
int aeron_driver_context_set_spies_simulate_connection(aeron_driver_context_t *context, bool value);
int aeron_driver_context_set_mtu_length(aeron_driver_context_t *context, size_t value);
int aeron_driver_context_set_ipc_mtu_length(aeron_driver_context_t *context, size_t value);
int aeron_driver_context_set_publication_linger_timeout_ns(aeron_driver_context_t *context, uint64_t value);
int aeron_driver_context_set_image_liveness_timeout_ns(aeron_driver_context_t *context, uint64_t value);
int aeron_driver_context_set_driver_timeout_ms(aeron_driver_context_t *context, uint64_t value);
int aeron_driver_init(aeron_driver_t **driver, aeron_driver_context_t *context);
int aeron_driver_start(aeron_driver_t *driver, bool manual_main_loop);
int aeron_driver_close(aeron_driver_t *driver);

/* is a live driver using this directory (aeronc.h; log_func is called, never NULL) */
bool aeron_is_driver_active(const char *dirname, int64_t timeout_ms, aeron_log_func_t log_func);
"""

# Layout facts the declarations above must reproduce (checked by the unit tests).
COUNTER_RECORD_UNUSED = 0
COUNTER_RECORD_ALLOCATED = 1
COUNTER_RECORD_RECLAIMED = -1
COUNTER_MAX_KEY_LENGTH = 112
COUNTER_MAX_LABEL_LENGTH = 380
# aeron_counter_value_descriptor_t: value, registration id, owner id, padded to two cache lines.
COUNTER_VALUE_LENGTH = 128
COUNTER_REGISTRATION_ID_OFFSET = 8
# aeron_counter_metadata_descriptor_t: state, type id, free-for-reuse deadline, key, label.
COUNTER_METADATA_LENGTH = 512
COUNTER_TYPE_ID_OFFSET = 4
COUNTER_KEY_OFFSET = 16

ffi = cffi.FFI()
ffi.cdef(_PACKED_CDEF, packed=False, pack=4)
ffi.cdef(_CDEF)


def declared_function_names() -> list[str]:
    """Names of every C function declared above (the tests prove each one is exercised)."""
    return re.findall(r"\b(aeron_\w+)\s*\(", _CDEF)


def _library_path() -> str:
    import pyaeron._pyaeron as extension

    return extension.__file__


_real_lib = ffi.dlopen(_library_path())
lib = _real_lib


def function_pointer(name: str) -> object:
    """A C function of the library as a function pointer (to pass as a handler to C)."""
    pointer = ffi.addressof(_real_lib, name)
    if isinstance(lib, _TracingLib):
        lib.pointer_names[int(ffi.cast("uintptr_t", pointer))] = name
    return pointer


class _TracingLib:
    """Test-only stand-in for ``lib`` that records which declared functions get called, including
    library functions handed to C as handlers. Enabled by AERON_SPARK_TRACE_CAPI=<file>, which
    receives the called names at exit (see tests/integration/driver/test_capi_coverage.py)."""

    def __init__(self, real: object, output_path: str) -> None:
        self._real = real
        self.called: set[str] = set()
        self.pointer_names: dict[int, str] = {}
        atexit.register(self._write, output_path)

    def _write(self, output_path: str) -> None:
        with open(output_path, "w") as out:
            out.write("\n".join(sorted(self.called)))

    def __getattr__(self, name: str) -> object:
        target = getattr(self._real, name)
        if not callable(target):
            return target  # enum constants
        called, pointer_names = self.called, self.pointer_names

        def traced(*args: object) -> object:
            called.add(name)
            for arg in args:
                if isinstance(arg, ffi.CData) and ffi.typeof(arg).kind == "function":
                    handed = pointer_names.get(int(ffi.cast("uintptr_t", arg)))
                    if handed is not None:
                        called.add(handed)
            return target(*args)

        return traced


def aeron_version() -> str:
    """The full version string of the Aeron C library in use."""
    return ffi.string(lib.aeron_version_full()).decode()


if os.environ.get("AERON_SPARK_TRACE_CAPI"):
    lib = _TracingLib(_real_lib, os.environ["AERON_SPARK_TRACE_CAPI"])
