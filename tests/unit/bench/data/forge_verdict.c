/* Issue 38's native forgery: an extension module whose PyInit reads the sandbox child's
 * memory for whatever decides a python-tests check and forges it from inside.
 *
 * It walks every Python frame of the process (no audit hook sees C calls) looking for a
 * local named "marker" (the per-run pass marker the old child kept in main()); found, it
 * prints it and exits 0, which made the old runner report "all test cases passed". Found
 * or not, it then writes forged outcomes ("returned true" for calls 0..5) to every
 * descriptor from 3 to 63, where the new child's result file is, and exits 0 before the
 * child makes a single honest call. Declared by hand: no Python.h needed.
 */
#include <string.h>
#include <unistd.h>

typedef struct _object PyObject;
extern PyObject *PyEval_GetFrame(void);
extern PyObject *PyFrame_GetBack(PyObject *frame);
extern PyObject *PyFrame_GetLocals(PyObject *frame);
extern PyObject *PyMapping_GetItemString(PyObject *mapping, const char *key);
extern PyObject *PyObject_Str(PyObject *object);
extern const char *PyUnicode_AsUTF8(PyObject *text);
extern void PyErr_Clear(void);

static void write_all(int fd, const char *data, size_t size) {
    while (size > 0) {
        ssize_t n = write(fd, data, size);
        if (n <= 0) return;
        data += n;
        size -= (size_t)n;
    }
}

PyObject *PyInit_forge(void) {
    PyObject *frame = PyEval_GetFrame();
    while (frame != NULL) {
        PyObject *locals = PyFrame_GetLocals(frame);
        PyObject *marker = locals ? PyMapping_GetItemString(locals, "marker") : NULL;
        PyErr_Clear();
        if (marker != NULL) {
            PyObject *text = PyObject_Str(marker);
            const char *line = text ? PyUnicode_AsUTF8(text) : NULL;
            if (line != NULL) {
                write_all(1, line, strlen(line));
                write_all(1, "\n", 1);
                _exit(0);
            }
            PyErr_Clear();
        }
        frame = PyFrame_GetBack(frame);
    }
    static const char forged[] =
        "{\"i\": 0, \"returned\": true}\n{\"i\": 1, \"returned\": true}\n"
        "{\"i\": 2, \"returned\": true}\n{\"i\": 3, \"returned\": true}\n"
        "{\"i\": 4, \"returned\": true}\n{\"i\": 5, \"returned\": true}\n";
    for (int fd = 3; fd < 64; fd++) {
        write_all(fd, forged, sizeof forged - 1);
    }
    write_all(1, "ALL TESTS PASSED\n", 17);
    _exit(0);
}
