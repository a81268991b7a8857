// The main of sdy-dl's compiled Soufflé binaries: one process serves every
// call of its program (see sdy_dl/engines/souffle_server.py for the protocol).
//
// Linked with the C++ that `souffle -g` generates for one or more programs of
// the cache, compiled with __EMBEDDED_SOUFFLE__ (no main of its own; each
// program registers itself with Soufflé's ProgramFactory under its name).
// Started with `--serve NAME`, it writes "!ready"; then, per call, it reads the
// input relations' tuples, runs program NAME, writes every output relation
// (its name, rows and bytes, then the rows) and "!done", and empties all
// relations.  Started with `-F FACTS -D OUT NAME`, it runs NAME once on fact
// files, as Soufflé's own binaries do.  Fields are tab-separated as in Soufflé's fact
// files; symbols travel in sdy-dl's fact-file escaping (no tab or newline
// inside a field) and are kept escaped, which preserves equality.  The rows of
// a relation of numbers only may instead come as native 32-bit integers.

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "souffle/SouffleInterface.h"
#include "souffle/io/IOSystem.h"

namespace souffle {

// Soufflé's I/O for the generated code, which calls this instead of
// IOSystem::getInstance() (sdy_dl/engines/souffle_trim.py): its readers and
// writers are compiled here, once per cache, not in every program.
IOSystem& sdy_dl_io() {
    return IOSystem::getInstance();
}

}  // namespace souffle

namespace {

bool read_line(std::string& line) {
    line.clear();
    int c;
    while ((c = getc_unlocked(stdin)) != EOF) {
        if (c == '\n') return true;
        line.push_back(static_cast<char>(c));
    }
    return !line.empty();
}

void fail(const std::string& message) {
    std::fputs(("!error " + message + "\n").c_str(), stdout);
    std::fflush(stdout);
}

// One field of relation `rel`'s column `i`, as Soufflé stores it.
souffle::RamDomain encode(souffle::Relation& rel, std::size_t i, const std::string& field) {
    switch (*rel.getAttrType(i)) {
        case 's': return rel.getSymbolTable().encode(field);
        case 'u': return souffle::ramBitCast(static_cast<souffle::RamUnsigned>(std::stoul(field)));
        case 'f': return souffle::ramBitCast(static_cast<souffle::RamFloat>(std::stod(field)));
        default: return static_cast<souffle::RamDomain>(std::stol(field));
    }
}

void write_field(std::string& out, souffle::Relation& rel, std::size_t i, souffle::RamDomain v) {
    switch (*rel.getAttrType(i)) {
        case 's': out += rel.getSymbolTable().decode(v); return;
        case 'u': out += std::to_string(souffle::ramBitCast<souffle::RamUnsigned>(v)); return;
        case 'f': out += std::to_string(souffle::ramBitCast<souffle::RamFloat>(v)); return;
        default: out += std::to_string(v); return;
    }
}

// The rows of a relation of numbers only: `rows` times its arity native 32-bit
// integers (`arity`: the sender's, for a relation Soufflé dropped).
void read_numbers(souffle::Relation* rel, long rows, std::size_t arity) {
    std::vector<std::int32_t> values(static_cast<std::size_t>(rows) * arity);
    if (std::fread(values.data(), sizeof(std::int32_t), values.size(), stdin) != values.size()) {
        throw std::runtime_error("truncated request");
    }
    if (rel == nullptr) return;
    souffle::tuple t(rel);
    for (std::size_t k = 0; k < values.size(); k += arity) {
        for (std::size_t i = 0; i < arity; ++i) t[i] = values[k + i];
        rel->insert(t);
    }
}

// Read "@<relation> <rows>" (text) and "#<relation> <rows> <arity>" (numbers)
// blocks up to "!run"; false at the end of the input.
bool read_inputs(souffle::SouffleProgram& program) {
    std::string line;
    while (read_line(line)) {
        if (line == "!run") return true;
        std::size_t space = line.find(' ');
        if (line.empty() || (line[0] != '@' && line[0] != '#') || space == std::string::npos) {
            throw std::runtime_error("bad request line: " + line);
        }
        // Soufflé drops an input relation no output depends on: its rows are skipped.
        souffle::Relation* rel = program.getRelation(line.substr(1, space - 1));
        std::size_t end = 0;
        long rows = std::stol(line.substr(space + 1), &end);
        if (line[0] == '#') {
            std::size_t arity = std::stoul(line.substr(space + 1 + end));
            if (rel != nullptr && rel->getArity() != arity) {
                throw std::runtime_error("wrong arity for " + rel->getName());
            }
            read_numbers(rel, rows, arity);
            continue;
        }
        for (long r = 0; r < rows; ++r) {
            if (!read_line(line)) throw std::runtime_error("truncated request");
            if (rel == nullptr) continue;
            std::size_t arity = rel->getArity();
            souffle::tuple t(rel);
            std::size_t start = 0;
            for (std::size_t i = 0; i < arity; ++i) {
                std::size_t end = i + 1 < arity ? line.find('\t', start) : line.size();
                if (end == std::string::npos) throw std::runtime_error("short row: " + line);
                t[i] = encode(*rel, i, line.substr(start, end - start));
                start = end + 1;
            }
            rel->insert(t);
        }
    }
    return false;
}

void write_outputs(souffle::SouffleProgram& program) {
    std::string out, rows;
    for (souffle::Relation* rel : program.getOutputRelations()) {
        rows.clear();
        std::size_t arity = rel->getArity();
        for (auto& t : *rel) {
            for (std::size_t i = 0; i < arity; ++i) {
                if (i) rows += '\t';
                write_field(rows, *rel, i, t[i]);
            }
            rows += '\n';
        }
        out += "@" + rel->getName() + " " + std::to_string(rel->size()) + " " +
               std::to_string(rows.size()) + "\n" + rows;
    }
    out += "!done\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
    bool serve = argc == 3 && std::strcmp(argv[1], "--serve") == 0;
    bool files = argc == 6 && std::strcmp(argv[1], "-F") == 0 && std::strcmp(argv[3], "-D") == 0;
    if (!serve && !files) {
        std::fputs("usage: program --serve NAME | program -F FACTS -D OUT NAME\n", stderr);
        return 2;
    }
    const char* name = argv[argc - 1];
    souffle::SouffleProgram* program = souffle::ProgramFactory::newInstance(name);
    if (program == nullptr) {
        std::fprintf(stderr, "no program %s linked\n", name);
        return 2;
    }
    if (files) {
        try {
            program->loadAll(argv[2]);
            program->run();
            program->printAll(argv[4]);
        } catch (std::exception& e) {
            std::fprintf(stderr, "%s\n", e.what());
            return 1;
        }
        return 0;
    }
    std::fputs("!ready\n", stdout);
    std::fflush(stdout);
    while (true) {
        try {
            if (!read_inputs(*program)) return 0;
            // No file I/O; internal relations are emptied at their last use (the
            // trimmed programs have no wrapper through which to purge them).
            program->runAll("", "", false, true);
            write_outputs(*program);
        } catch (std::exception& e) {
            fail(e.what());
        }
        program->purgeInputRelations();
        program->purgeInternalRelations();
        program->purgeOutputRelations();
    }
}
