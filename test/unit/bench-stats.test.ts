/** The benches' order statistics (`bench/lib/stats.ts`): which value each reports, on odd, even, unsorted and empty inputs. */
import { describe, expect, it } from 'vitest'
import { median, percentile, percentileOfSorted, upperMedian } from '../../bench/lib/stats.ts'

describe('bench stats', () => {
  it('median: the middle value, the mean of the two middle ones for an even count, NaN for none; the input is left as it was', () => {
    const values = [9, 1, 5]
    expect(median(values)).toBe(5)
    expect(values).toEqual([9, 1, 5])
    expect(median([10, 2, 4, 100])).toBe(7)
    expect(median([3])).toBe(3)
    // Numeric order, not the default string order ('10' < '9').
    expect(median([10, 9, 1])).toBe(9)
    expect(median([])).toBeNaN()
  })

  it('upperMedian: the higher middle value (a measured one), 0 for none', () => {
    expect(upperMedian([10, 2, 4, 100])).toBe(10)
    expect(upperMedian([9, 1, 5])).toBe(5)
    expect(upperMedian([10, 9, 1])).toBe(9)
    expect(upperMedian([])).toBe(0)
  })

  it('percentile: nearest rank, the largest value at 100, NaN for none', () => {
    const values = Array.from({ length: 100 }, (_, i) => 100 - i)
    expect(percentile(values, 50)).toBe(51)
    expect(percentile(values, 99)).toBe(100)
    expect(percentile(values, 100)).toBe(100)
    expect(percentile(values, 0)).toBe(1)
    expect(percentile([10, 9, 1], 50)).toBe(9)
    expect(percentile([], 50)).toBeNaN()
    expect(percentileOfSorted([1, 2, 3, 4], 74)).toBe(3)
    expect(percentileOfSorted([1, 2, 3, 4], 75)).toBe(4)
    expect(percentileOfSorted([], 99)).toBeNaN()
  })
})
