#!/usr/bin/env bash
# Applies deliberate bugs to a scratch copy of the sources, one at a time, and runs the suites
# that should notice. Prints one line per mutant: killed (by which tests) or SURVIVED. Every
# mutant must be killed; run it before stopping when the core, the wire or the store changed.
#
#   scripts/mutate.sh            # every mutant
#   scripts/mutate.sh digest     # the mutants whose name contains "digest"
#   scripts/mutate.sh sync sse   # ... "sync" or "sse"
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
scratch=${MUTATE_DIR:-/tmp/diffcast-mutants}
rm -rf "$scratch/src"
mkdir -p "$scratch/src"
# Extracted with fresh times (-m), so the baseline build recompiles every module: an
# incremental build over a changed stored-property layout can keep stale code that crashes.
git ls-files -co --exclude-standard | tar -cf - -T - | tar -xmf - -C "$scratch/src"
build="$scratch/build"
# The daemon tests and the Python suites start the binaries built here, not the source tree's.
export DIFFCASTD="$build/debug/diffcastd" DIFFCAST="$build/debug/diffcast"

# name | file | exact text to replace | replacement | test filter
mutants=$(cat <<'EOF'
constant-digest|Sources/DiffcastCore/Digest.swift|        value = part.value\n    }\n\n    /// The digest of plain values|        value = 0\n    }\n\n    /// The digest of plain values|DiffcastCoreTests|DiffcastWireTests
every-survivor-moved|Sources/DiffcastCore/LongestIncreasingSubsequence.swift|        members[position] = true|        members[position] = false|DiffcastCoreTests
unsorted-lists|Sources/DiffcastCore/Changeset.swift|    public mutating func sortLists() {|    public mutating func sortLists() {\n        if Bool(true) { return }|DiffcastCoreTests
unicode-equivalent-ids-merged|Sources/DiffcastCore/Identifier.swift|        lhs.bytesHash == rhs.bytesHash\n            && (UTF8Bytes.sameRepresentation(lhs.text, rhs.text)|        lhs.text == rhs.text\n            && (Bool(true) ? true : UTF8Bytes.sameRepresentation(lhs.text, rhs.text)|DiffcastCoreTests|DiffcastWireTests
accept-unknown-keys|Sources/DiffcastWire/RequestDecoder.swift|        for member in object.members where !allowed|        for member in object.members where Bool(false) && !allowed|DiffcastWireTests
escaped-slash-taken-as-canonical|Sources/DiffcastWire/JSONParser.swift|                decoded.append(byte)\n                return false|                decoded.append(byte)\n                return true|DiffcastWireTests
compact-append-takes-any-name|Sources/DiffcastWire/CompactAppendReader.swift|                CollectionName.isValid(utf8: UnsafeBufferPointer(rebasing: line[start..<end]))|                Bool(true)|DiffcastWireTests
compact-append-takes-spaced-data|Sources/DiffcastWire/CompactAppendReader.swift|            guard token.isCanonical else { return nil }|            _ = token.isCanonical|DiffcastWireTests
compact-append-data-one-level-up|Sources/DiffcastWire/CompactAppendReader.swift|                try cursor.parseValue(depth: 3)|                try cursor.parseValue(depth: 2)|DiffcastWireTests
compact-append-ignores-trailing-bytes|Sources/DiffcastWire/CompactAppendReader.swift|reader.skip("}"), reader.isAtEnd|reader.skip("}")|DiffcastWireTests
compact-append-section-dropped|Sources/DiffcastWire/CompactAppendReader.swift|            section = Identifier(id)|            _ = Identifier(id)|DiffcastWireTests
compact-append-null-kept-as-data|Sources/DiffcastWire/CompactAppendReader.swift|            if token.kind == .null { return .some(nil) }|            _ = token.kind|DiffcastWireTests
spaced-object-taken-as-canonical|Sources/DiffcastWire/JSONParser.swift|            var canonical = !skipWhitespace()\n            var seenKeys|            var canonical = true\n            skipWhitespace()\n            var seenKeys|DiffcastWireTests
answer-run-spans-gaps|Sources/DiffcastEngine/ApplyEngine+Writes.swift|                write.address.slot == current.first.slot &+ UInt64(current.writes)|                Bool(true)|ApplyEngineTests|FanOutTests
answer-run-counted-as-one|Sources/DiffcastServer/Connection.swift|            nextSlotToSend += UInt64(requests)|            nextSlotToSend += 1|FanOutTests|DaemonTests
collection-table-leaves-holes|Sources/DiffcastEngine/CollectionTable.swift|            if !stays {|            if Bool(false) {|CollectionTableTests
chunk-table-first-copied|Sources/DiffcastCore/ChunkTable.swift|            guard var chunk = first.take() else|            guard var chunk = first else|ChunkTableTests
item-buffer-shared-storage-written|Sources/DiffcastCore/ItemBuffer.swift|        if isKnownUniquelyReferenced(&storage), header.capacity >= minimumCapacity {|        if header.capacity >= minimumCapacity {|ItemBufferTests
window-tables-shared|Sources/DiffcastEngine/WindowGroups.swift|        if isKnownUniquelyReferenced(&tables), let tables { return tables }|        if let tables { return tables }|ApplyEngineTests|DiskFullTests
open-batch-slot-kept-on-move|Sources/DiffcastEngine/ApplyEngine+Writes.swift|        last.state.openBatchSlot = Int32(slot)|        _ = last|ApplyEngineTests
request-line-set-in-shared-box|Sources/DiffcastWire/Request.swift|            if isKnownUniquelyReferenced(&fields) {|            if Bool(true) {|RequestParserTests
request-keeps-line-regardless|Sources/DiffcastWire/Request.swift|        if keep {|        if Bool(true) {|RequestParserTests
journal-without-lines|Sources/DiffcastServer/Server.swift|        parser.keepsLines = commit?.keepsLogRecords == true|        parser.keepsLines = Bool(false) && commit?.keepsLogRecords == true|DurabilityTests
wal-records-never-written|Sources/DiffcastStorage/WriteAheadLogCommit.swift|            try store.append(records)|            _ = records|DurabilityTests
wal-refused-batch-kept|Sources/DiffcastStorage/WriteAheadLogCommit.swift|            engine.rollBackLastBatch()\n            let wasWritable|            let wasWritable|DiskFullTests
wal-read-only-kept-after-room|Sources/DiffcastStorage/WriteAheadLogCommit.swift|            guard let self, self.store.hasRoom() else { return }|            guard let self, Bool(false), self.store.hasRoom() else { return }|DiskFullTests
workspace-lent-unemptied|Sources/DiffcastWire/RequestParser.swift|                    tokens.removeAll(keepingCapacity: true)|                    _ = tokens|RequestParserTests
access-kept-across-reload|Sources/DiffcastServer/Server+Access.swift|        for connection in connections.values {|        for connection in connections.values where Bool(false) {|AccessTests
shared-response-ignores-id|Sources/DiffcastEngine/ApplyEngine+Writes.swift|            if write.id == nil, let shared = lastShared|            if let shared = lastShared|DaemonTests|ApplyEngineTests
appended-chunk-misplaced|Sources/DiffcastCore/ItemList.swift|placements.append((item.id, chunks[chunks.count - 1].id))|placements.append((item.id, chunks[last].id))|DiffcastCoreTests
decimal-digits-one-short|Sources/DiffcastWire/JSONOutput.swift|        while digits < 20 && value >= power {|        while digits < 20 && value > power {|DiffcastWireTests
decimal-pair-digits-swapped|Sources/DiffcastWire/JSONOutput.swift|            room[index] = pairs[pair]\n            room[index + 1] = pairs[pair + 1]|            room[index] = pairs[pair + 1]\n            room[index + 1] = pairs[pair]|DiffcastWireTests
decimal-last-pair-taken-as-one-digit|Sources/DiffcastWire/JSONOutput.swift|        if rest >= 10 {|        if rest > 10 {|DiffcastWireTests
escape-hex-digits-swapped|Sources/DiffcastWire/JSONOutput.swift|            write(byte: hex.utf8Start[Int(byte >> 4)])|            write(byte: hex.utf8Start[Int(byte & 0x0f)])|DiffcastWireTests
shared-items-run-too-long|Sources/DiffcastCore/ItemBuffer.swift|                return run\n|                return run > 0 ? limit : 0\n|ItemBufferTests|DiffcastCoreTests
string-scan-passes-quotes|Sources/DiffcastWire/JSONParser.swift|                let quote = hasZeroByte(word ^ (ones &* UInt64(UInt8(ascii: "\""))))|                let quote: UInt64 = 0|DiffcastWireTests
digest-prefix-outlives-change|Sources/DiffcastCore/ItemList.swift|        currentPrefixes = Swift.min(currentPrefixes, index)|        _ = index|DiffcastCoreTests
shared-chunks-ignore-revision|Sources/DiffcastCore/ItemList.swift|            chunks[index].id == other.chunks[otherIndex].id\n                && chunks[index].revision == other.chunks[otherIndex].revision|            chunks[index].id == other.chunks[otherIndex].id|DiffcastCoreTests
chunk-digest-kept-after-change|Sources/DiffcastCore/ItemList.swift|                cachedDigest = DigestPart.empty.value\n                digestedCount = 0\n|\n|DiffcastCoreTests
response-before-event|Sources/DiffcastServer/Connection.swift|        guard let mark, let subscription = subscriptions[mark.collection] else { return true }|        guard let mark, let subscription = subscriptions[mark.collection], Bool(false) else { return true }|DaemonTests|FanOutTests
subscriber-over-limit-still-sent|Sources/DiffcastServer/FanOut.swift|            let withinUnsentLimit = !policy.unsentBytes.isAbove(connection.unsentBytes)|            let withinUnsentLimit = true|FanOutTests
turn-keeps-stale-place|Sources/DiffcastServer/WriteSchedule.swift|            if writer.scheduled.wait == .turn(place: place) {|            if case .turn = writer.scheduled.wait {|WriteScheduleTests
turn-count-drifts-on-remove|Sources/DiffcastServer/WriteSchedule.swift|        case .turn: turnsWaiting -= 1|        case .turn: break|WriteScheduleTests
spent-turns-kept|Sources/DiffcastServer/WriteSchedule.swift|        guard order.count == order.capacity, head >= 64, head * 2 >= order.count else { return }|        guard Bool(false) else { return }|WriteScheduleTests
subscription-taken-without-its-name|Sources/DiffcastServer/SubscriptionTable.swift|        if first?.name == name {\n            return first?.subscription.advance|        if first != nil {\n            return first?.subscription.advance|SubscriptionTableTests|FanOutTests
subscription-set-beside-its-own|Sources/DiffcastServer/SubscriptionTable.swift|            } else if first == nil && others[name] == nil {|            } else if first == nil {|SubscriptionTableTests
subscription-removal-misses-the-others|Sources/DiffcastServer/SubscriptionTable.swift|        return others.isEmpty ? nil : others.removeValue(forKey: name)|        return nil|SubscriptionTableTests|FanOutTests
peer-groups-never-asked|Sources/DiffcastAccess/AccessList.swift|        return !groupIDs.isEmpty && !groupIDs.isDisjoint(with: peerGroups())|        return Bool(false) && !groupIDs.isDisjoint(with: peerGroups())|AccessTests
peer-primary-group-left-out|Sources/DiffcastServer/PeerCredentials.swift|        var groupIDs: Set<UInt32> = [groupID]|        var groupIDs: Set<UInt32> = []|AccessTests
reload-forgets-peer-groups|Sources/DiffcastServer/PeerCredentials.swift|        let groups = peer.groupIDs()\n        found[peer] = groups|        let groups: Set<UInt32> = []\n        found[peer] = groups|AccessTests
parallel-partial-write-sent-whole|Sources/DiffcastServer/Server+Writing.swift|                queueWrite(of: taken.chunks, skipping: written, to: connection)|                queueWrite(of: taken.chunks, skipping: 0, to: connection)|DaemonTests
reading-never-paused|Sources/DiffcastServer/Server+Reading.swift|        guard connection.phase == .reading else { return }\n        if unsentBytes|        guard connection.phase == .reading, Bool(false) else { return }\n        if unsentBytes|DaemonTests
turn-taken-not-written|Sources/DiffcastServer/Server+Writing.swift|                write(connection)\n                budget -= 1|                if budget > 1 { write(connection) }\n                budget -= 1|DaemonTests
answer-lingers|Sources/DiffcastServer/Connection.swift|        case .eventStream, .webSocket: queuesOnlyEvents|        case .eventStream, .webSocket: true|FanOutTests
socket-lines-linger|Sources/DiffcastServer/Connection.swift|        case .lines, .http: false|        case .lines, .http: true|FanOutTests
history-total-only-grows|Sources/DiffcastEngine/CollectionState.swift|            earlierItems -= historyAndWindows.earlier[dropped].snapshot.itemCount|            _ = historyAndWindows.earlier[dropped]|ApplyEngineTests|DaemonTests
history-items-leave-out-current|Sources/DiffcastEngine/CollectionState.swift|earlierItems + currentItems > historyLimits.items|earlierItems > historyLimits.items|ApplyEngineTests
history-entry-misnumbered|Sources/DiffcastEngine/CollectionState.swift|        keep(previous, as: version)\n|        keep(previous, as: newVersion)\n|ApplyEngineTests
empty-start-outlives-its-drop|Sources/DiffcastEngine/CollectionState.swift|        if version == 0, keepsEmptyStart { return Snapshot() }|        if version == 0 { return Snapshot() }|ApplyEngineTests
send-at-once-beside-a-write|Sources/DiffcastServer/Server+Writing.swift|            connection.pending.isEmpty, !connection.pending.isWriting, connection.scheduled|            connection.pending.isEmpty, connection.scheduled|DaemonTests
send-at-once-rest-sent-again|Sources/DiffcastServer/Server+Writing.swift|        leaveRestToWrite(connection, sent: sent)|        leaveRestToWrite(connection, sent: 0)|DaemonTests
send-at-once-rest-dropped|Sources/DiffcastServer/Server+Writing.swift|        connection.pending.append(bytes)\n        leaveRestToWrite(connection, sent: sent)|        _ = sent|DaemonTests
line-entry-never-released|Sources/DiffcastServer/WriteSchedule.swift|        for entry in order[head...] { entry.release() }|        _ = head|WriteScheduleTests
line-turn-kept-retained|Sources/DiffcastServer/WriteSchedule.swift|            let writer = order[head].takeRetainedValue()|            let writer = order[head].takeUnretainedValue()|WriteScheduleTests
lone-buffer-overwritten|Sources/DiffcastServer/PendingWrites.swift|            if let first = lone.take() { several.append(first) }|            lone = nil|PendingWritesTests|FanOutTests
lone-buffer-taken-twice|Sources/DiffcastServer/PendingWrites.swift|        if let first = lone.take() {\n            taken = [first]|        if let first = lone {\n            taken = [first]|PendingWritesTests
answers-waiting-never-released|Sources/DiffcastServer/Connection.swift|        answeredOutOfTurn.isEmpty ? false : releaseAnswersWaiting()|        answeredOutOfTurn.isEmpty ? false : false|FanOutTests|DaemonTests
released-answer-not-announced|Sources/DiffcastServer/FanOut.swift|        if connection.releaseAnswers() { host.needsWrite(connection) }|        connection.releaseAnswers()|FanOutTests
catch-up-before-drained|Sources/DiffcastServer/FanOut.swift|        guard connection.mayHaveLaggingSubscriptions, policy.unsentBytes.hasDrained(connection.unsentBytes) else {|        guard connection.mayHaveLaggingSubscriptions else {|FanOutTests
lagging-flag-not-raised|Sources/DiffcastServer/FanOut.swift|subscription.version = window.eventVersion }\n        connection.subscriptions[name] = subscription\n        connection.mayHaveLaggingSubscriptions = true|subscription.version = window.eventVersion }\n        connection.subscriptions[name] = subscription|FanOutTests|py:Tests/HTTP/test_http.py::test_a_stalled_websocket_subscriber_holds_up_no_one_and_is_caught_up_with_one_changeset
subscriber-list-moved-place-lost|Sources/DiffcastServer/SubscriberList.swift|        places[last.id] = place|        _ = place|SubscriberListTests
skip-log-fsync|Sources/DiffcastStorage/StateStore.swift|            if options.sync == .always { try syncLog(path: path) }|            if options.sync == .never { try syncLog(path: path) }|DurabilityTests
corruption-taken-for-torn-tail|Sources/DiffcastStorage/StateStore.swift|                if let later = LogFrame.nextValidHeader(in: bytes, after: offset) {|                if Bool(false), let later = LogFrame.nextValidHeader(in: bytes, after: offset) {|StorageFaultTests|WriteAheadLogTests
transaction-undo-forgets-ids|Sources/DiffcastCore/Document.swift|            case .removed(let id, let chunk): directory?.add(id, chunk: chunk)|            case .removed: break|DiffcastCoreTests|DiskFullTests
small-document-scans-one-section|Sources/DiffcastCore/Document.swift|        for (sectionIndex, section) in snapshot.sections.enumerated() {|        for (sectionIndex, section) in snapshot.sections.prefix(1).enumerated() {|DiffcastCoreTests
directory-built-in-batch-not-undone|Sources/DiffcastCore/Document+Indexes.swift|        undo?.directoryChanges.append(.replaced(nil))|        _ = undo|DiffcastCoreTests
small-apply-takes-duplicates|Sources/DiffcastCore/Document+Sections.swift|            duplicate = Self.firstRepeatedItem(in: inputs)|            _ = Self.firstRepeatedItem(in: inputs)|DiffcastCoreTests
directory-collisions-merged|Sources/DiffcastCore/ItemDirectory.swift|        if !overflow.isEmpty, let chunk = overflow[id] { return chunk }|        if Bool(false), let chunk = overflow[id] { return chunk }|DiffcastCoreTests
directory-removal-leaves-holes|Sources/DiffcastCore/ItemDirectory.swift|            if fromHome >= Self.distance(from: free, to: next, in: slots.count) {|            if Bool(false) {|DiffcastCoreTests
table-match-by-hash-alone|Sources/DiffcastCore/IdentifierTable.swift|                if isIdentifier(position) { return position }|                return position|DiffcastCoreTests
lis-replaces-only-last|Sources/DiffcastCore/LongestIncreasingSubsequence.swift|value <= last { low = 0 }|value <= last { low = tailValues.count - 1 }|DiffcastCoreTests
fast-path-deletions-dropped|Sources/DiffcastCore/Differ+UntouchedItems.swift|            changes.deleted = oldPlaces.map { .init(at: $0.value.path, id: $0.key) }|            changes.deleted = []|DiffcastCoreTests
full-diff-data-unseen|Sources/DiffcastCore/Differ.swift|.items.hasSameData(at: place & Self.offsetMask, as: other)|.items.identifier(at: place & Self.offsetMask, equals: other.id)|DiffcastCoreTests
table-position-cut-to-32-bits|Sources/DiffcastCore/IdentifierTable.swift|UInt64(position + 1)|UInt64(UInt32(truncatingIfNeeded: position + 1))|IdentifierTableTests
table-hash-bits-ignored|Sources/DiffcastCore/IdentifierTable.swift|            if (slot & ~Self.positionMask) == (hash & ~Self.positionMask) {\n                let position|            if Bool(true) {\n                let position|IdentifierTableTests
old-place-offset-lost|Sources/DiffcastCore/Differ.swift|            return ItemPath(chunk.section, chunk.start + (place & Self.offsetMask))|            return ItemPath(chunk.section, chunk.start)|DiffcastCoreTests
shared-pages-by-size|Sources/DiffcastCore/ChunkTable.swift|                    mine.baseAddress == theirs.baseAddress && mine.count == theirs.count|                    mine.count == theirs.count|ItemListTests
written-bytes-still-counted|Sources/DiffcastServer/PendingWrites.swift|        queuedBytes -= bytes\n    }\n\n    /// Takes up to|        _ = bytes\n    }\n\n    /// Takes up to|PendingWritesTests|FanOutTests|DaemonTests
written-buffers-kept|Sources/DiffcastServer/PendingWrites.swift|            several.removeFirst(count)|            _ = count|PendingWritesTests|FanOutTests|DaemonTests
answer-flag-lost|Sources/DiffcastServer/PendingWrites.swift|        if isAnswer { holdsAnswer = true }|        _ = isAnswer|PendingWritesTests|FanOutTests
write-never-finished|Sources/DiffcastServer/PendingWrites.swift|        bytesInFlight -= bytes\n        isWriting = false|        bytesInFlight -= bytes|PendingWritesTests|DaemonTests
same-text-by-first-word|Sources/DiffcastCore/Identifier.swift|            && unsafeBitCast(lhs, to: (UInt64, UInt64).self) == unsafeBitCast(rhs, to: (UInt64, UInt64).self)|            && unsafeBitCast(lhs, to: (UInt64, UInt64).self).0 == unsafeBitCast(rhs, to: (UInt64, UInt64).self).0|DiffcastCoreTests
runs-all-start-at-the-range|Sources/DiffcastCore/ItemList.swift|                body(position, UnsafeBufferPointer(rebasing: items[offset..<end]))|                body(range.lowerBound, UnsafeBufferPointer(rebasing: items[offset..<end]))|ItemListTests
full-diff-claims-twice|Sources/DiffcastCore/Differ.swift|                claimed[rank] = true|                claimed[rank] = false|DiffcastCoreTests
unmoved-sections-data-unseen|Sources/DiffcastCore/Differ.swift|            for index in new.sections.indices where old.sections[index].data != new.sections[index].data {|            for index in new.sections.indices where Bool(false) {|DiffcastCoreTests
own-log-messages-applied-again|Sources/DiffcastEngine/SharedLogApplier.swift|        logPosition[name].map { sequence <= $0 } ?? false|        false|SharedLogApplierTests
fenced-batch-kept|Sources/DiffcastEngine/SharedLogApplier.swift|            engine.rollBackLastBatch()\n            backbone.release(name)\n            return nil|            _ = engine.commitLastBatch()\n            backbone.release(name)\n            return produced|SharedLogApplierTests
unpersisted-batch-kept|Sources/DiffcastEngine/ApplyEngine.swift|    public func rollBackLastBatch() {|    public func rollBackLastBatch() {\n        if Bool(true) { return }|DiskFullTests
drop-open-to-every-peer|Sources/DiffcastAccess/Holder.swift|            case .drop: return peer.mayWrite|            case .drop: return Bool(true)|AccessTests
reads-checked-against-publishers|Sources/DiffcastServer/Server+Access.swift|                    mayRead: configuration.subscribers.allows(connection.peer, groups: { lookups.groups(of: $0) }),|                    mayRead: configuration.publishers.allows(connection.peer, groups: { lookups.groups(of: $0) }),|AccessTests
subscribe-open-to-every-peer|Sources/DiffcastAccess/Holder.swift|        switch command {\n        case .ping, .auth:\n            return nil|        if case .subscribe = command { return nil }\n        switch command {\n        case .ping, .auth:\n            return nil|AccessTests
tcp-list-without-token|Sources/DiffcastAccess/Holder.swift|            if let readable, readable.isEmpty { return refused(.read, nil, op: op) }|            _ = readable|AccessTests|HolderTests
window-empty-section-past-the-end|Sources/DiffcastCore/Window.swift|(placeOfSection == range.upper && range.upper == range.total)|(placeOfSection == range.upper)|WindowTests
window-anchor-passes-backwards-first|Sources/DiffcastCore/Window.swift|                previous.firstSurvivor(after: anchorPosition, in: document)\n                ?? previous.lastSurvivor(before: anchorPosition, in: document)|                previous.lastSurvivor(before: anchorPosition, in: document)\n                ?? previous.firstSurvivor(after: anchorPosition, in: document)|WindowTests
window-marks-ignored|Sources/DiffcastCore/Window.swift|marksMayTouch(marks, document, newRange) else { return nil }|Bool(false) else { return nil }|WindowTests
window-whole-chunk-digest-skipped|Sources/DiffcastCore/Window.swift|                    part.append(current.digest)|                    part.append(.empty)|WindowTests
window-touched-item-ignored|Sources/DiffcastCore/Window.swift|            let inside = touched.contains { range.lower <= $0 && $0 < range.upper }|            let inside = touched.isEmpty|WindowTests
window-undo-forgotten|Sources/DiffcastEngine/CollectionState.swift|            historyAndWindows.windows = saved.windows\n|\n|ApplyEngineTests
window-group-per-subscriber|Sources/DiffcastEngine/WindowGroups.swift|        if let existing = tables.byKey[tracker.key], tables.groups[existing] != nil {|        if Bool(false), let existing = tables.byKey[tracker.key] {|ApplyEngineTests
window-catch-up-from-current-view|Sources/DiffcastEngine/ApplyEngine+Subscriptions.swift|        if let old = snapshot(of: state, at: since)?.view(range) {|        if let old = Optional(tracker.view) {|ApplyEngineTests
poison-log-message-applied|Sources/DiffcastEngine/SharedLogApplier.swift|            guard engine.followsHeldVersion(message.records) else {|            guard Bool(true) else {|SharedLogApplierTests
skipped-log-message-keeps-position|Sources/DiffcastEngine/SharedLogApplier.swift|            defer { logPosition[name] = max(logPosition[name] ?? 0, message.sequence) }|            defer { if !message.records.isEmpty { logPosition[name] = max(logPosition[name] ?? 0, message.sequence) } }|SharedLogApplierTests
forged-snapshot-adopted|Sources/DiffcastEngine/SharedLogApplier.swift|        guard snapshot.logSequence <= logEnd else {|        guard Bool(true) else {|SharedLogApplierTests
forwarded-answer-holds-back|Sources/DiffcastEngine/SharedLogApplier+Forwarding.swift|version: logHoldsTheAnswer ? min(version, held) : version)|version: version)|SharedLogApplierTests
forwarded-answer-past-log-end|Sources/DiffcastEngine/SharedLogApplier+Forwarding.swift|            if sequence > end {|            if Bool(false) {|SharedLogApplierTests
forwarded-read-decoded|Sources/DiffcastEngine/SharedLogApplier+Forwarding.swift|                default:\n                    outcomes.append(.relayed(address, SharedBytes(line)))\n                    continue|                default:\n                    break|SharedLogApplierTests
forwarded-answer-read-shallow|Sources/DiffcastEngine/SharedLogApplier+Forwarding.swift|ResponseDecoder.response(line, maximumDepth: depth)|ResponseDecoder.response(line, maximumDepth: 4)|SharedLogApplierTests
state-directory-unlocked|Sources/DiffcastStorage/StateStore.swift|        lockDescriptor = try Self.lock(directory)|        lockDescriptor = -1|StartupRefusalTests
checkpoint-forgets-history|Sources/DiffcastStorage/CheckpointFile.swift|            if !entry.history.isEmpty {|            if Bool(false) {|DurabilityTests
scope-rest-matches-nothing-after|Sources/DiffcastWire/Rights.swift|                    return names.next() != nil|                    return true|HolderTests
scope-name-pattern-matches-prefix|Sources/DiffcastWire/Rights.swift|        if isName { return UTF8Bytes.equal(name, description) }|        if isName { return name.hasPrefix(description) }|HolderTests
scope-wildcard-taken-as-name|Sources/DiffcastWire/Rights.swift|        isName = tokens.allSatisfy { if case .literal = $0 { true } else { false } }|        isName = !tokens.isEmpty|HolderTests
scope-star-matches-many|Sources/DiffcastWire/Rights.swift|                    guard names.next() != nil else { return false }|                    return names.next() != nil|HolderTests
scope-literal-prefix-matches|Sources/DiffcastWire/Rights.swift|            return names.next() == nil|            return true|HolderTests
scope-read-ignored|Sources/DiffcastAccess/Holder.swift|            case .read: return rights.read.contains(collection)|            case .read: return true|HolderTests|py:Tests/Access/test_rights.py
scope-write-is-read|Sources/DiffcastAccess/Holder.swift|            case .write: return rights.write.contains(collection)|            case .write: return rights.read.contains(collection)|HolderTests|py:Tests/Access/test_rights.py
scope-drop-is-write|Sources/DiffcastAccess/Holder.swift|            case .drop: return rights.drop.contains(collection)|            case .drop: return rights.write.contains(collection)|HolderTests|py:Tests/Access/test_rights.py
scope-stats-without-admin|Sources/DiffcastAccess/Holder.swift|            case .admin: return false|            case .admin: return true|HolderTests|py:Tests/Access/test_rights.py
scope-anonymous-not-joined|Sources/DiffcastAccess/Holder.swift|            case .token(let token): scopedRights = token.rights.union(anonymous)|            case .token(let token): scopedRights = token.rights|HolderTests|py:Tests/Access/test_anonymous.py
scope-expiry-unchecked|Sources/DiffcastAccess/TokenVerifier.swift|        guard now <= expiry + leewaySeconds else|        guard Bool(true) else|TokenVerifierTests|py:Tests/Access/test_tokens.py
scope-any-alg-for-a-key|Sources/DiffcastAccess/KeySet.swift|            key.algorithm == algorithm && (identifier|            Bool(true) && (identifier|TokenVerifierTests|py:Tests/Access/test_tokens.py
scope-unknown-kid-tries-others|Sources/DiffcastAccess/KeySet.swift|(identifier == nil|(Bool(true)|TokenVerifierTests
scope-alg-none-checked-by-keys|Sources/DiffcastAccess/TokenVerifier.swift|        guard algorithm != "none" else|        guard Bool(true) else|TokenVerifierTests
scope-signature-unchecked|Sources/DiffcastAccess/TokenVerifier.swift|        guard isSigned else { throw TokenRefusal("bad signature") }|        _ = isSigned|TokenVerifierTests|py:Tests/Access/test_tokens.py
scope-list-unfiltered|Sources/DiffcastServer/Server+Access.swift|            if let readable = holder.readable { request.command = .list(readable: readable) }|            _ = holder.readable|py:Tests/Access/test_rights.py
scope-readers-create-by-subscribing|Sources/DiffcastServer/Server+Access.swift|            if !holder.mayCreate(name) {|            if Bool(false) {|py:Tests/Access/test_rights.py
scope-expired-tokens-kept|Sources/DiffcastServer/Server+Access.swift|                now > token.expiresAt + leeway|                Bool(false)|py:Tests/Access/test_revocation.py
scope-removed-key-kept|Sources/DiffcastServer/Server+Access.swift|                    _ = setCredential(\n                        .anonymous, on: connection,\n                        reason: "the token for \(token.holderName) no longer holds|                    _ = setCredential(\n                        .token(token), on: connection,\n                        reason: "the token for \(token.holderName) no longer holds|py:Tests/Access/test_revocation.py
scope-narrowed-subscriptions-kept|Sources/DiffcastServer/Server+Access.swift|        for name in connection.subscriptions.names.sorted() where !connection.holder.may(.read, name) {|        for name in connection.subscriptions.names.sorted() where Bool(false) {|py:Tests/Access/test_revocation.py
scope-subject-limit-ignored|Sources/DiffcastServer/Server+Access.swift|            guard held < limit else {|            guard Bool(true) else {|py:Tests/Access/test_limits.py
scope-401-as-403|Sources/DiffcastServer/Connection.swift|            guard status == 403, !presentedToken else {|            guard Bool(false) else {|py:Tests/Access/test_tokens.py
scope-throttle-never-blocks|Sources/DiffcastAccess/FailedAuthThrottle.swift|        let blocks = record.failures.count >= maximumFailures|        let blocks = Bool(false)|py:Tests/Access/test_tokens.py
scope-refused-auth-drops-rights|Sources/DiffcastServer/Server+Access.swift|        case .failure(let refusal):\n            failure = refusal\n        }\n        let error|        case .failure(let refusal):\n            failure = refusal\n            connection.holder.credential = .anonymous\n        }\n        let error|py:Tests/Access/test_tokens.py
catch-up-overtaken-kept|Sources/DiffcastServer/FanOut.swift|let published = publishedVersions[name], published > version {|let published = publishedVersions[name], published > version, Bool(false) {|FanOutTests
sync-interval-never-syncs|Sources/DiffcastStorage/StateStore.swift|        guard options.sync == .interval, hasUnsyncedRecords,|        guard Bool(false), hasUnsyncedRecords,|SyncPolicyTests
decoder-drops-reloaded|Sources/DiffcastWire/EventDecoder.swift|        for entry in list(value, "reloaded") {|        for entry in list(value, "reloaded") where Bool(false) {|EventDecoderTests
applier-deletion-identity-unchecked|Sources/DiffcastCore/Changeset+Apply.swift|            guard item.id == deletion.id else {|            guard Bool(true) else {|ChangesetApplyTests|CollectionMirrorTests
mirror-digest-unchecked|Sources/DiffcastClient/CollectionMirror.swift|        guard let digest, digest == computed.description else {|        guard Bool(true) else {|CollectionMirrorTests|GoldenVectorTests
settings-unknown-key-after-known|Sources/DiffcastConfiguration/DaemonSettings.swift|        for (key, value) in mapping {|        for (key, value) in mapping.prefix(1) {|DaemonSettingsTests
sub-state-resumes-one-collection|Sources/diffcast/Subscribe.swift|        for (name, held) in file.takeMirrors(of: collections) {|        for (name, held) in file.takeMirrors(of: collections).prefix(1) {|py:Tests/EndToEnd/test_cli.py::test_sub_of_two_collections_resumes_both_from_one_state_file
backbone-lease-kept-on-stop|Sources/DiffcastBackbone/NATSBackbone.swift|            for (collection, lease) in held where lease.deadline > .now {|            for (collection, lease) in held where lease.deadline > .now && Bool(false) {|py:Tests/Backbone/test_backbone.py::test_an_owner_stopped_cleanly_hands_its_collections_over_at_once
sse-resume-query-ignored|Sources/DiffcastHTTP/HTTPRouter.swift|        } else if let since = query["since"].flatMap(UInt64.init) {|        } else if Bool(false), let since = query["since"].flatMap(UInt64.init) {|py:Tests/HTTP/test_http.py::test_server_sent_events_resume_from_the_query_and_start_anew_on_another_epoch
lingering-flag-never-cleared|Sources/DiffcastServer/WriteSchedule.swift|            writer.scheduled.wait = .none\n            streams.append(writer)|            streams.append(writer)|WriteScheduleTests|py:Tests/HTTP/test_http.py::test_server_sent_events_resume_with_last_event_id_and_one_changeset
cors-preflight-headers-cut|Sources/DiffcastHTTP/HTTPRouter.swift|"Access-Control-Allow-Headers: Authorization, Content-Type, Last-Event-ID",|"Access-Control-Allow-Headers: Content-Type",|py:Tests/HTTP/test_http.py::test_a_cors_preflight_names_what_a_page_may_send
heartbeat-never-sent|Sources/DiffcastServer/Server+HTTP.swift|            connection.enqueue(SharedBytes(ServerSentEvents.heartbeat))|            _ = ServerSentEvents.heartbeat|py:Tests/HTTP/test_http.py::test_an_idle_event_stream_gets_heartbeats_and_its_events_between_them
heartbeat-setting-dropped|Sources/diffcastd/ServerConfiguration+Settings.swift|        streamHeartbeatMilliseconds = UInt64(settings.streamHeartbeatMs)\n|\n|py:Tests/HTTP/test_http.py::test_an_idle_event_stream_gets_heartbeats_and_its_events_between_them
setting-in-another-place|Sources/DiffcastConfiguration/DaemonSettings.swift|"stream_linger_ms", .integer(\.streamLingerMs,|"stream_linger_ms", .integer(\.streamHeartbeatMs,|DaemonSettingsTests|py:Tests/EndToEnd/test_settings.py
setting-range-unchecked|Sources/DiffcastConfiguration/Setting.swift|            guard !range.contains(number) else { return }|            guard Bool(false) else { return }|DaemonSettingsTests
setting-choice-unchecked|Sources/DiffcastConfiguration/Setting.swift|            guard !choices.contains(settings[keyPath: path]) else { return }|            guard Bool(false) else { return }|DaemonSettingsTests
restart-keys-not-named|Sources/DiffcastConfiguration/DaemonSettings.swift|        all.filter { $0.applies == .afterRestart && $0.differs(old, new) }|        all.filter { $0.applies == .onReload && $0.differs(old, new) }|DaemonSettingsTests
option-argument-dropped|Sources/DiffcastConfiguration/DaemonSettings.swift|            try setting.read(option: value, into: &self)|            _ = value|DaemonSettingsTests|py:Tests/EndToEnd/test_settings.py
websocket-after-pipelined-taken|Sources/DiffcastServer/Server+HTTP.swift|    private func startWebSocket(accept: String, form: EventForm, for request: HTTPRequest, on connection: Connection) {\n        guard connection.outstandingRequests == 0 else {|    private func startWebSocket(accept: String, form: EventForm, for request: HTTPRequest, on connection: Connection) {\n        guard Bool(true) else {|py:Tests/HTTP/test_http.py::test_a_websocket_upgrade_after_pipelined_requests_is_refused_once_they_are_answered
compact-form-never-chosen|Sources/DiffcastHTTP/HTTPRouter.swift|        case "1", "true": .compact|        case "1", "true": .full|HTTPRouterTests|py:Tests/HTTP/test_http.py::test_a_compact_event_stream_sends_changesets_without_their_envelope_and_they_verify
compact-form-not-kept|Sources/DiffcastServer/Server+HTTP.swift|        connection.eventForm = form\n        sendWithoutDelay(connection)\n        subscribe|        sendWithoutDelay(connection)\n        subscribe|py:Tests/HTTP/test_http.py::test_a_compact_event_stream_sends_changesets_without_their_envelope_and_they_verify
compact-keeps-epoch-and-from|Sources/DiffcastWire/CompactEvents.swift|        compact += line[rest...]|        compact += line[collectionEnd...]|CompactEventsTests|FramedEventTests|py:Tests/HTTP/test_http.py::test_a_compact_event_stream_sends_changesets_without_their_envelope_and_they_verify
compact-stream-names-kind|Sources/DiffcastHTTP/ServerSentEvents.swift|        if namingKind, let kind|        if let kind|FramedEventTests|py:Tests/HTTP/test_http.py::test_a_compact_event_stream_sends_changesets_without_their_envelope_and_they_verify
compact-websocket-drops-collection|Sources/DiffcastServer/FramedEvent.swift|CompactEvents.changeset($0, keepingCollection: true)|CompactEvents.changeset($0, keepingCollection: false)|FramedEventTests|py:Tests/HTTP/test_http.py::test_a_compact_websocket_keeps_the_collection_of_each_changeset
compact-string-end-missed|Sources/DiffcastWire/CompactEvents.swift|                case UInt8(ascii: "\\"): index += 2|                case UInt8(ascii: "\\"): index += 1|CompactEventsTests
mirror-compact-from-refused|Sources/DiffcastClient/CollectionMirror.swift|            let from = given ?? current|            let from = given ?? current + 1|GoldenVectorTests
python-mirror-compact-from-refused|clients/python/diffcast/mirror.py|            start = _version(event, "from") if "from" in event else self.version|            start = _version(event, "from")|py:clients/python/tests/test_mirror.py
linger-growth-uncapped|Sources/DiffcastServer/Server+Writing.swift|min(flush.nanoseconds / 3_000_000, Self.maximumLingerMilliseconds)|flush.nanoseconds / 3_000_000|LingerTests
linger-grows-with-whole-flush|Sources/DiffcastServer/Server+Writing.swift|min(flush.nanoseconds / 3_000_000, Self.maximumLingerMilliseconds)|min(flush.nanoseconds / 1_000_000, Self.maximumLingerMilliseconds)|LingerTests
linger-grows-after-large-writes|Sources/DiffcastServer/Server+Writing.swift|guard flush.wroteWhole, flush.bytesPerStream < Self.smallWriteBytes else|guard flush.wroteWhole else|LingerTests
linger-grows-with-readers-behind|Sources/DiffcastServer/Server+Writing.swift|guard flush.wroteWhole, flush.bytesPerStream < Self.smallWriteBytes else|guard flush.bytesPerStream < Self.smallWriteBytes else|LingerTests
js-compact-from-not-filled|clients/js/diffcast.js|: { epoch: this.epoch, from: this.version, ...event };|: event;|node:clients/js/test/mirror.test.mjs
js-chain-unchecked|clients/js/diffcast.js|        if (changeset.from !== this.version) {|        if (false) {|node:clients/js/test/mirror.test.mjs
js-epoch-unchecked|clients/js/diffcast.js|        if (changeset.epoch !== this.epoch) throw|        if (false) throw|node:clients/js/test/mirror.test.mjs
js-digest-unchecked|clients/js/diffcast.js|    if (actual !== expected) throw|    if (false) throw|node:clients/js/test/mirror.test.mjs
line-checks-transport-first|Sources/DiffcastServer/RequestChecks.swift|        for check in allCases {|        for check in allCases.reversed() {|RequestCheckTests
subscribe-over-plain-http-runs|Sources/DiffcastServer/RequestChecks.swift|            guard !carriesEvents, case .subscribe = request.command else { return nil }|            guard Bool(false) else { return nil }|RequestCheckTests|py:Tests/HTTP/test_http.py::test_a_subscribe_in_a_plain_request_is_refused_for_its_transport_and_names_the_ones_that_carry_events
http-checks-token-first|Sources/DiffcastServer/RequestChecks.swift|        for check in HTTPCheck.allCases {|        for check in HTTPCheck.allCases.reversed() {|py:Tests/Access/test_rights.py::test_an_origin_is_refused_before_the_token_is_looked_at_and_the_denial_is_logged
origin-never-refused|Sources/DiffcastServer/RequestChecks.swift|                guard let message = router.originRefusal(request) else { continue }|                guard Bool(false), let message = router.originRefusal(request) else { continue }|py:Tests/HTTP/test_http.py::test_the_token_and_the_origins_are_checked
origin-denial-unlogged|Sources/DiffcastServer/RequestChecks.swift|                logDenial(op: "http", collection: nil, reason: message, on: connection)|                _ = message|py:Tests/Access/test_rights.py::test_an_origin_is_refused_before_the_token_is_looked_at_and_the_denial_is_logged
line-denial-unlogged|Sources/DiffcastServer/Server+Access.swift|        logDenial(op: request.op, collection: refusal.collection, reason: refusal.message, on: connection)\n        connection.answer(|        connection.answer(|py:Tests/Access/test_rights.py::test_every_denial_is_logged_with_its_holder_transport_op_and_collection
stream-token-not-taken|Sources/DiffcastServer/RequestChecks.swift|                case .requests, .eventStream, .webSocket:|                case .eventStream, .webSocket:\n                    continue\n                case .requests:|py:Tests/Access/test_rights.py::test_read_permits_get_and_event_streams_over_http
tcp-send-buffer-ignored|Sources/DiffcastServer/Server+Reading.swift|        if endpoint.isTCP, configuration.tcpSendBufferBytes > 0 {|        if endpoint.isTCP, Bool(false), configuration.tcpSendBufferBytes > 0 {|py:Tests/HTTP/test_http.py::test_a_small_tcp_send_buffer_brings_a_stalled_subscribers_catch_up_sooner
one-buffer-write-whatever-the-count|Sources/DiffcastServer/PendingWrites.swift|        guard several.count == 1 else { return nil }|        guard !several.isEmpty else { return nil }|PendingWritesTests
one-buffer-drop-keeps-answer-flag|Sources/DiffcastServer/PendingWrites.swift|            lone = nil\n            holdsAnswer = false\n        } else if count|            lone = nil\n        } else if count|PendingWritesTests
one-buffer-partial-send-taken-whole|Sources/DiffcastServer/Server+Writing.swift|            return (1, only.count, Self.send(only, to: connection.descriptor))|            return (1, only.count, max(Self.send(only, to: connection.descriptor), only.count))|DaemonTests
catch-ups-never-asked-after-writes|Sources/DiffcastServer/Server+Writing.swift|        if connection.mayHaveLaggingSubscriptions { fanOut.requestCatchUpsIfDrained(connection) }|        if Bool(false), connection.mayHaveLaggingSubscriptions { fanOut.requestCatchUpsIfDrained(connection) }|DaemonTests
outgoing-moved-copies-taken|Sources/DiffcastCore/ItemDirectory.swift|let index = Self.index(of: hash, in: outgoing.slots), index >= outgoingMoved else {|let index = Self.index(of: hash, in: outgoing.slots), index >= 0 else {|ItemDirectoryTests
outgoing-removal-frees-slot|Sources/DiffcastCore/ItemDirectory.swift|            outgoing?.slots[index] = Slot(hash: Self.removed, chunk: 0)|            outgoing?.slots[index] = Slot(hash: Self.free, chunk: 0)|ItemDirectoryTests
outgoing-never-looked-up|Sources/DiffcastCore/ItemDirectory.swift|        return outgoingIndex(of: hash).map(Place.outgoing)|        return nil|ItemDirectoryTests
growth-moves-everything-at-once|Sources/DiffcastCore/ItemDirectory.swift|        table = Storage(count: size)\n        moveOutgoing(Self.slotsMovedPerAdd)|        table = Storage(count: size)\n        moveOutgoing(outgoing?.slots.count ?? 0)|ItemDirectoryTests
growth-moves-nothing-per-add|Sources/DiffcastCore/ItemDirectory.swift|        } else if outgoing != nil {\n            moveOutgoing(Self.slotsMovedPerAdd)|        } else if Bool(false) {\n            moveOutgoing(Self.slotsMovedPerAdd)|ItemDirectoryTests
slot-hash-one-taken-as-removed|Sources/DiffcastCore/ItemDirectory.swift|        bits <= removed ? 2 : bits|        bits == free ? 2 : bits|ItemDirectoryTests
directory-copy-shares-written-slots|Sources/DiffcastCore/ItemDirectory.swift|        if !isKnownUniquelyReferenced(&table) { table = Storage(copying: table) }|        if Bool(false) { table = Storage(copying: table) }|ItemDirectoryTests
directory-copy-shares-outgoing-slots|Sources/DiffcastCore/ItemDirectory.swift|        if outgoing != nil, !isKnownUniquelyReferenced(&outgoing), let shared = outgoing {|        if Bool(false), let shared = outgoing {|ItemDirectoryTests
directory-add-misses-outgoing-holder|Sources/DiffcastCore/ItemDirectory.swift|        if outgoingIndex(of: hash) != nil { return addToOverflow(identifier(), chunk: chunk) }|        if Bool(false), outgoingIndex(of: hash) != nil { return addToOverflow(identifier(), chunk: chunk) }|ItemDirectoryTests
directory-same-hash-overwritten|Sources/DiffcastCore/ItemDirectory.swift|            if slots[index].hash == hash { return addToOverflow(identifier(), chunk: chunk) }|            if slots[index].hash == hash { break }|ItemDirectoryTests
directory-colliding-item-dropped|Sources/DiffcastCore/ItemDirectory.swift|        overflow[id] = chunk\n        return false|        _ = id\n        return false|ItemDirectoryTests
apply-collision-taken-as-duplicate|Sources/DiffcastCore/Document+Sections.swift|                        Self.occurrences(of: identifier(), in: sections, atLeast: 2)|                        Bool(true)|ItemDirectoryTests
index-colliding-item-dropped|Sources/DiffcastCore/Document+Indexes.swift|                table.add(hashBits: hashBits, chunk: chunk, identifier: identifier)|                _ = table.add(hashBits: hashBits, chunk: chunk) { Identifier("") }|ItemDirectoryTests
hash-walk-ahead-skipped|Sources/DiffcastCore/ItemList.swift|                    if index + aheadDistance < items.count { ahead(|                    if Bool(false), index + aheadDistance < items.count { ahead(|ItemListTests
hash-walk-chunk-start-not-announced|Sources/DiffcastCore/ItemList.swift|                for index in items.indices.prefix(aheadDistance) { ahead(items[index].id.hashBits) }\n|\n|ItemListTests
EOF
)

# A filter `py:PATH` names a pytest suite and `node:PATH` a node test file, each run against the
# copy's daemon; the others filter `swift test`. The unmutated copy must pass every suite used below, or a "kill" would prove nothing.
swift_filters() { tr '|' '\n' | { grep -Ev '^(py|node):' || true; } | sort -u | paste -sd'|'; }
python_suites() { tr '|' '\n' | { grep '^py:' || true; } | sed 's/^py://' | sort -u | paste -sd' '; }
node_suites() { tr '|' '\n' | { grep '^node:' || true; } | sed 's/^node://' | sort -u | paste -sd' '; }
# With a name given, only the mutants it selects (and only their suites in the baseline).
if [ $# -gt 0 ]; then
  mutants=$(echo "$mutants" | awk -F'|' -v parts="$*" \
    'BEGIN { n = split(parts, wanted, " ") } { for (i = 1; i <= n; i++) if (index($1, wanted[i]) > 0) { print; next } }')
fi
all_filters=$(echo "$mutants" | cut -d'|' -f5- | swift_filters)
all_python=$(echo "$mutants" | cut -d'|' -f5- | python_suites)
all_node=$(echo "$mutants" | cut -d'|' -f5- | node_suites)
(cd "$scratch/src" && swift build --build-tests --scratch-path "$build" >"$scratch/baseline.log" 2>&1) \
  || { echo "the unmutated copy does not build (see $scratch/baseline.log)"; exit 1; }
[ -z "$all_filters" ] || (cd "$scratch/src" && swift test --skip-build --scratch-path "$build" --no-parallel \
  --filter "$all_filters" >>"$scratch/baseline.log" 2>&1) \
  || { echo "the unmutated copy fails its suites (see $scratch/baseline.log)"; exit 1; }
# A mutant can make a suite wait forever (a client blocked on a daemon that died): each suite
# run gets MUTANT_TIMEOUT seconds (15 minutes by default), and one it stops counts as a kill,
# named "a hang" in the result.
limit=${MUTANT_TIMEOUT:-900}
limited() {
  local status=0
  timeout --kill-after=30 "$limit" "$@" || status=$?
  if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
    echo "mutate.sh: the suite hung and was stopped after $limit s"
  fi
  return "$status"
}
# Each Python suite runs in a pytest of its own: their conftest modules share one name.
run_python() {
  local suite
  for suite in "$@"; do
    (cd "$scratch/src" && limited python3 -m pytest -q -x -p no:cacheprovider "$suite") || return 1
  done
}
run_node() {
  [ $# -eq 0 ] || (cd "$scratch/src" && limited node --test "$@")
}
# shellcheck disable=SC2086
run_python $all_python >>"$scratch/baseline.log" 2>&1 \
  || { echo "the unmutated copy fails its Python suites (see $scratch/baseline.log)"; exit 1; }
# shellcheck disable=SC2086
run_node $all_node >>"$scratch/baseline.log" 2>&1 \
  || { echo "the unmutated copy fails its node suites (see $scratch/baseline.log)"; exit 1; }

# Suites that run only as root (other users' credentials, a tmpfs mounted): a mutant that only
# they kill is reported as skipped, not as a survivor, when this runs as another user.
root_only="AccessTests DiskFullTests"
needs_root() {
  local killer
  for killer in $(echo "$1" | tr '|' ' '); do
    [[ " $root_only " == *" $killer "* ]] || return 1
  done
}

killed=0
survived=0
skipped=0
printf '%-32s %s\n' "mutant" "result"
while IFS='|' read -r name file from to filters; do
  [ -n "$name" ] || continue
  if [ "$(id -u)" != 0 ] && needs_root "$filters"; then
    printf '%-32s %s\n' "$name" "skipped: only root runs its killers ($filters)"
    skipped=$((skipped + 1))
    continue
  fi
  # The copy's own file is kept and put back: the source tree may change while this runs.
  cp "$scratch/src/$file" "$scratch/pristine"
  python3 - "$scratch/src/$file" "$from" "$to" <<'PY'
import sys
path, old, new = sys.argv[1], sys.argv[2].replace("\\n", "\n"), sys.argv[3].replace("\\n", "\n")
text = open(path).read()
if text.count(old) != 1:
    sys.exit(f"mutant does not apply: {old!r} found {text.count(old)} times in {path}")
open(path, "w").write(text.replace(old, new))
PY
  log="$scratch/$name.log"
  filter=$(echo "$filters" | swift_filters)
  suites=$(echo "$filters" | python_suites)
  node_files=$(echo "$filters" | node_suites)
  if ! (cd "$scratch/src" && swift build --build-tests --scratch-path "$build" >"$log" 2>&1); then
    printf '%-32s %s\n' "$name" "killed by the compiler (see $log)"
    killed=$((killed + 1))
  elif { [ -z "$filter" ] || (cd "$scratch/src" && limited swift test --skip-build --scratch-path "$build" --no-parallel --filter "$filter" >>"$log" 2>&1); } \
    && run_python $suites >>"$log" 2>&1 && run_node $node_files >>"$log" 2>&1; then
    printf '%-32s %s\n' "$name" "SURVIVED ($filter)"
    survived=$((survived + 1))
  else
    # A crash leaves no "✘ Test" line: grep then fails, which must not end the run (pipefail).
    tests=$( { grep -oE '✘ Test [A-Za-z0-9_]+\(' "$log" | sed 's/✘ Test //; s/(//'; grep -oE '^FAILED [^ ]+' "$log" | sed 's/^FAILED .*:://'; grep -oE '^not ok [0-9]+ - .*' "$log" | sed 's/^not ok [0-9]* - //'; } | sort -u | head -4 | paste -sd, - || true)
    if grep -q '^mutate.sh: the suite hung' "$log"; then tests="${tests:+$tests, }a hang"; fi
    printf '%-32s %s\n' "$name" "killed by ${tests:-a crash (see $log)}"
    killed=$((killed + 1))
  fi
  cp "$scratch/pristine" "$scratch/src/$file"
done <<< "$mutants"
echo "$killed killed, $survived survived, $skipped skipped (need root)"
[ "$survived" -eq 0 ]
